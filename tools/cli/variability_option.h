// The what-if flags of `lacuna simulate` (docs/variability.md,
// docs/outputs.md): --ideal, --seed S, --straggler host=N:F, --slow-link
// SPEC and --set FIELD=VALUE, collected as scenario edits
// (sim/scenario/edits.h) that the loader applies before presets and
// validation; and what a run does with the program's variability.
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "sim/report/summary.h"
#include "sim/scenario/edits.h"
#include "sim/variability/variability_model.h"

namespace lacuna::cli {

void add_variability_options(CLI::App* sub, scenario::ScenarioEdits& edits);
// --set only (for commands that run the deterministic model).
void add_set_option(CLI::App* sub, scenario::ScenarioEdits& edits);

// The perturbation of a run of `program` (null when its variability is all
// off). With fold, throws lacuna::Error naming --fold when a source cannot be
// folded (docs/variability.md#fold).
std::unique_ptr<variability::VariabilityModel> make_perturbation(const ir::Program& program, bool fold);

// The report section (unset when the variability is off).
std::optional<report::VariabilitySummary> variability_summary(const ir::Program& program,
                                                             const variability::VariabilityModel* model,
                                                             uint64_t link_flaps);

}  // namespace lacuna::cli
