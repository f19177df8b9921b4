// `lacuna simulate --iterations N --samples K -j N` (the runner is
// sim/run/monte_carlo_runner.h).
#pragma once

#include <CLI/CLI.hpp>

#include "sim/run/monte_carlo_runner.h"

namespace lacuna::cli {

using SamplingOptions = run::SamplingPlan;

// Adds --iterations, --samples and -j/--jobs to `sub` (--seed is the
// variability's, tools/cli/variability_option.h).
void add_sampling_options(CLI::App* sub, SamplingOptions& o);

}  // namespace lacuna::cli
