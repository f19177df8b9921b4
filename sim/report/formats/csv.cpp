#include "sim/report/formats/csv.h"

#include <cmath>
#include <cstdint>

#include <fmt/format.h>

namespace lacuna::report::csv {

std::string field(std::string_view text) {
  const bool quote = text.find_first_of(",\"\r\n") != std::string_view::npos ||
                     (!text.empty() && (text.front() == ' ' || text.back() == ' '));
  if (!quote) return std::string(text);
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

std::string row(const std::vector<std::string>& fields) {
  std::string out;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) out += ',';
    out += field(fields[i]);
  }
  out += '\n';
  return out;
}

std::string number(double value) {
  if (!std::isfinite(value)) return {};
  // Whole numbers as integers: counts and ns stay readable ("3072", not
  // "3072.0"); beyond 2^53 a double holds no exact integer, so keep fmt's form.
  if (value == std::trunc(value) && std::fabs(value) < 9007199254740992.0) {
    return fmt::format("{}", static_cast<int64_t>(value));
  }
  return fmt::format("{}", value);  // shortest round-trip (fmt's default)
}

}  // namespace lacuna::report::csv
