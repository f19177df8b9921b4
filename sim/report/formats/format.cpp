#include "sim/report/formats/format.h"

#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

namespace lacuna::report {

std::string format_duration(TimeNs t) {
  const int64_t ns = t.count();
  const int64_t mag = ns < 0 ? -ns : ns;
  if (mag >= 1'000'000'000) return fmt::format("{:.3f} s", t.seconds());
  if (mag >= 1'000'000) return fmt::format("{:.3f} ms", t.ms());
  if (mag >= 1'000) return fmt::format("{:.3f} µs", t.us());
  return fmt::format("{} ns", ns);
}

std::string format_gb(Bytes b) { return fmt::format("{:.2f} GB", b.gb()); }

std::string format_percent(double fraction) { return fmt::format("{:.2f} %", fraction * 100.0); }

std::string format_si(double value, const std::string& unit) {
  static constexpr const char* kPrefixes[] = {"", "k", "M", "G", "T", "P", "E"};
  int p = 0;
  double v = value;
  while (std::fabs(v) >= 1000.0 && p < 6) {
    v /= 1000.0;
    ++p;
  }
  if (p == 0) return fmt::format("{:.3f} {}", v, unit);
  return fmt::format("{:.3f} {} {}", v, kPrefixes[p], unit);
}

std::string format_flops_rate(double flops_per_s) {
  if (flops_per_s >= 1e12) return fmt::format("{:.1f} TFLOP/s", flops_per_s / 1e12);
  return fmt::format("{:.2f} GFLOP/s", flops_per_s / 1e9);
}

std::string micros_exact(int64_t ns) {
  const bool negative = ns < 0;
  // Magnitude in unsigned arithmetic so INT64_MIN does not overflow.
  const uint64_t mag = negative ? uint64_t{0} - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  return fmt::format("{}{}.{:03}", negative ? "-" : "", mag / 1000, mag % 1000);
}

size_t display_columns(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string pad_left(const std::string& s, size_t width) {
  const size_t n = display_columns(s);
  return n >= width ? s : std::string(width - n, ' ') + s;
}

std::string pad_right(const std::string& s, size_t width) {
  const size_t n = display_columns(s);
  return n >= width ? s : s + std::string(width - n, ' ');
}

}  // namespace lacuna::report
