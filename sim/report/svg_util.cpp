#include "sim/report/svg_util.h"

#include <fmt/format.h>

namespace lacuna::report::svg {

std::string xml_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

int64_t tick_step(int64_t total_ns) {
  for (int64_t step = 1;; step *= 10) {
    for (int64_t m : {1, 2, 5}) {
      if (total_ns / (step * m) <= 12) return step * m;
    }
  }
}

std::string tick_label(int64_t ns, int64_t step_ns) {
  int decimals = 0;
  for (int64_t unit = 1'000'000; unit > step_ns && decimals < 6; unit /= 10) ++decimals;
  return fmt::format("{:.{}f} ms", static_cast<double>(ns) * 1e-6, decimals);
}

}  // namespace lacuna::report::svg
