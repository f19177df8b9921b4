#include "sim/scenario/parse.h"

#include "sim/core/input_file.h"

namespace lacuna::scenario {

size_t first_invalid_utf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = len > 0 && i + len <= text.size();
    for (size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(text[i + k]) >> 6) == 0x2;
    // Overlong forms and surrogates are invalid too.
    if (ok && len == 2) ok = c >= 0xC2;
    if (ok && len == 3) {
      const auto c1 = static_cast<unsigned char>(text[i + 1]);
      ok = !(c == 0xE0 && c1 < 0xA0) && !(c == 0xED && c1 >= 0xA0);
    }
    if (ok && len == 4) {
      const auto c1 = static_cast<unsigned char>(text[i + 1]);
      ok = c <= 0xF4 && !(c == 0xF0 && c1 < 0x90) && !(c == 0xF4 && c1 >= 0x90);
    }
    if (!ok || c == 0) return i;
    i += len;
  }
  return std::string_view::npos;
}

void check_utf8(std::string_view text, const SourceMap& locations) {
  if (starts_with_utf8_bom(text)) {
    throw Error(SourceLocation{locations.file(), 1, 1, {}}, "the file starts with a UTF-8 byte-order mark (BOM)",
                "save it as UTF-8 without a BOM");
  }
  const size_t bad = first_invalid_utf8(text);
  if (bad == std::string_view::npos) return;
  int line = 1;
  size_t line_start = 0;
  for (size_t k = 0; k < bad; ++k)
    if (text[k] == '\n') {
      ++line;
      line_start = k + 1;
    }
  const size_t column = bad - line_start;
  const bool nul = text[bad] == '\0';
  throw Error(SourceLocation{locations.file(), line, static_cast<int>(column) + 1, {}},
              nul ? "the file contains a NUL byte" : "the file is not valid UTF-8 text",
              nul ? "this reads text: check that the file is not binary or truncated" : "save the file as UTF-8 text");
}

}  // namespace lacuna::scenario
