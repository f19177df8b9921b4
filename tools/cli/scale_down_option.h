// `--scale-down N`, shared by the commands that load a scenario (compile,
// calibrate, compare, simulate, execute): divide hidden sizes and sequence
// lengths by N before validation and compilation (sim/scenario/scale_down.h),
// so that every command sees the same, smaller program.
#pragma once

#include <cstdint>

#include <CLI/CLI.hpp>

namespace lacuna::cli {

// Adds --scale-down N to `sub` (N ≥ 1; `factor` keeps its value, normally 1,
// when the option is absent).
void add_scale_down_option(CLI::App* sub, int64_t& factor);

}  // namespace lacuna::cli
