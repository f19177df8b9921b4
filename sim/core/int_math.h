// Integer helpers shared across modules.
#pragma once

#include <cstdint>
#include <optional>

namespace lacuna {

// ⌈a / b⌉ for a >= 0, b > 0 (tiles, waves, shards).
constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

static_assert(ceil_div(0, 4) == 0 && ceil_div(1, 4) == 1 && ceil_div(8, 4) == 2 && ceil_div(9, 4) == 3);

// a · b and a + b, or nullopt where int64 would wrap: for sizes derived from
// input files, which a caller refuses by name rather than use wrapped.
constexpr std::optional<std::int64_t> checked_mul(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}
constexpr std::optional<std::int64_t> checked_add(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

static_assert(checked_mul(3, 5) == 15 && !checked_mul(std::int64_t{1} << 62, 4) && !checked_add(INT64_MAX, 1));

}  // namespace lacuna
