// Integer helpers shared across modules.
#pragma once

#include <cstdint>

namespace lacuna {

// ⌈a / b⌉ for a >= 0, b > 0 (tiles, waves, shards).
constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

static_assert(ceil_div(0, 4) == 0 && ceil_div(1, 4) == 1 && ceil_div(8, 4) == 2 && ceil_div(9, 4) == 3);

}  // namespace lacuna
