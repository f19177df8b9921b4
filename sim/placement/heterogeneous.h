// Heterogeneous parallelism (MegatronMIMO): each module in its own layout and
// rank set; colocated (three-phase schedule) or non-colocated (encoder island,
// graph-aware 1F1B), joined by boundary communicators (docs/placements.md).
#pragma once

#include "sim/cost/cost_model.h"
#include "sim/proto/program.pb.h"
#include "sim/scenario/scenario.h"

namespace lacuna::placement {

ir::Program compile_heterogeneous(const scenario::LoadedScenario& scenario, const cost::CostModel& cost);

}  // namespace lacuna::placement
