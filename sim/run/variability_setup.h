// What one run does with the program's variability (docs/variability.md):
// the engine's perturbation and the report's section.
#pragma once

#include <memory>
#include <optional>

#include "sim/proto/program.pb.h"
#include "sim/report/analyses/summary.h"
#include "sim/variability/variability_model.h"

namespace lacuna::run {

// The perturbation of a run of `program` (null when its variability is all
// off). With fold, throws lacuna::Error naming --fold when a source cannot be
// folded (docs/variability.md#fold).
std::unique_ptr<variability::VariabilityModel> make_perturbation(const ir::Program& program, bool fold);

// The report section (unset when the variability is off).
std::optional<report::VariabilitySummary> variability_summary(const ir::Program& program,
                                                             const variability::VariabilityModel* model,
                                                             uint64_t link_flaps);

}  // namespace lacuna::run
