// The what-if flags of `lacuna simulate` (docs/variability.md,
// docs/outputs.md): --ideal, --seed S, --straggler host=N:F, --slow-link
// SPEC and --set FIELD=VALUE, collected as scenario edits
// (sim/scenario/edits.h) that the loader applies before presets and
// validation (a run's perturbation is in sim/run/variability_setup.h).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "sim/scenario/edits.h"

namespace lacuna::cli {

void add_variability_options(CLI::App* sub, scenario::ScenarioEdits& edits);
// --set only (for commands that run the deterministic model).
void add_set_option(CLI::App* sub, scenario::ScenarioEdits& edits);

}  // namespace lacuna::cli
