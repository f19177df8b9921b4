// Wall-clock durations as a clock reads them, for progress lines and ETAs:
// 65 s → "1:05", 3723 s → "1:02:03"; negative or not finite → "?".
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

namespace lacuna {

inline std::string clock_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0 || seconds > 1e12) return "?";
  const auto s = static_cast<long long>(std::llround(seconds));
  char buf[48];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, (s / 60) % 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lld:%02lld", s / 60, s % 60);
  }
  return buf;
}

}  // namespace lacuna
