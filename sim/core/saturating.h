// Saturating arithmetic on non-negative byte and count totals: a sum or
// product that would pass INT64_MAX stays at INT64_MAX, so an estimate built
// from input sizes never wraps to a small or negative figure (issue 16).
#pragma once

#include <cstdint>
#include <limits>

namespace lacuna {

// a, b >= 0.
constexpr std::int64_t saturating_add(std::int64_t a, std::int64_t b) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  return a > kMax - b ? kMax : a + b;
}

// a, b >= 0.
constexpr std::int64_t saturating_mul(std::int64_t a, std::int64_t b) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  if (a == 0 || b == 0) return 0;
  return a > kMax / b ? kMax : a * b;
}

static_assert(saturating_add(std::numeric_limits<std::int64_t>::max() - 1, 2) == std::numeric_limits<std::int64_t>::max());
static_assert(saturating_mul(std::int64_t{1} << 62, 4) == std::numeric_limits<std::int64_t>::max());
static_assert(saturating_mul(3, 5) == 15 && saturating_add(3, 5) == 8);

}  // namespace lacuna
