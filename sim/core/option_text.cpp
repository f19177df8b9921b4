#include "sim/core/option_text.h"

namespace lacuna {

std::string abbreviate(std::string_view value, size_t shown) {
  if (value.size() <= shown) return std::string(value);
  size_t cut = shown;
  while (cut > 0 && (static_cast<unsigned char>(value[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
  return std::string(value.substr(0, cut)) + "… (" + std::to_string(value.size()) + " bytes)";
}

std::string option_ref(std::string_view name, std::string_view value) {
  std::string out(kOptionOpen);
  out += name;
  if (!value.empty()) {
    out += ' ';
    out += abbreviate(value);
  }
  out += kOptionClose;
  return out;
}

std::string spell_options(std::string_view text, const OptionSpelling& spell) {
  std::string out;
  out.reserve(text.size());
  size_t at = 0;
  while (at < text.size()) {
    const size_t open = text.find(kOptionOpen, at);
    const size_t close = open == std::string_view::npos ? open : text.find(kOptionClose, open + kOptionOpen.size());
    if (close == std::string_view::npos) break;
    out += text.substr(at, open - at);
    const std::string_view ref = text.substr(open + kOptionOpen.size(), close - open - kOptionOpen.size());
    const size_t space = ref.find(' ');
    out += space == std::string_view::npos ? spell(ref, {}) : spell(ref.substr(0, space), ref.substr(space + 1));
    at = close + kOptionClose.size();
  }
  out += text.substr(at);
  return out;
}

std::string neutral_option(std::string_view name, std::string_view value) {
  std::string out = "`";
  out += name;
  if (!value.empty()) {
    out += ' ';
    out += value;
  }
  return out + "`";
}

std::string neutral_options(std::string_view text) { return spell_options(text, neutral_option); }

std::string cli_option(std::string_view name, std::string_view value) {
  std::string out = name.size() == 1 ? "-" : "--";
  out += name;
  if (!value.empty()) {
    out += ' ';
    out += value;
  }
  return out;
}

}  // namespace lacuna
