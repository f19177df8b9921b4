// Scenario → program for any model: LLM-only scenarios go through
// compiler::compile; multimodal ones through their placement
// (docs/placements.md).
#pragma once

#include <vector>

#include "sim/cost/cost_model.h"
#include "sim/placement/recompute_fit.h"
#include "sim/proto/program.pb.h"
#include "sim/scenario/scenario.h"

namespace lacuna::placement {

// The scenario's own placement (placement.kind; LLM-only: plain compile).
// Placements that time kernels while planning (Optimus, Megatron balanced,
// heterogeneous) use the analytic cost model of the scenario's cluster.
ir::Program compile(const scenario::LoadedScenario& scenario);

// The same with the cost model the simulation will use (e.g. a calibrated
// one), so that planning and simulation agree on kernel times.
ir::Program compile(const scenario::LoadedScenario& scenario, const cost::CostModel& cost);

// The same workload under another placement (`lacuna compare`). Throws
// lacuna::Error naming what is missing when `kind` does not apply.
ir::Program compile_as(const scenario::LoadedScenario& scenario, scenario::PlacementKind kind);
ir::Program compile_as(const scenario::LoadedScenario& scenario, scenario::PlacementKind kind,
                       const cost::CostModel& cost);

// The recompute search's view of a multimodal placement (MEGATRON_BASELINE,
// MEGATRON_BALANCED, MEGATRON_LAYER_SPLIT, HETEROGENEOUS, MEGATRON_ENCODER_PP;
// Optimus plans its recompute in its planner): the recompute the scenario asks of each module, and the placement
// compiled with any recompute per module (memory overheads applied).
// compile_as runs fit_recompute with them (docs/memory-model.md#feasibility).
// The function refers to `scenario` and `cost`, which must outlive it.
RecomputeRequest recompute_request(const scenario::LoadedScenario& scenario, scenario::PlacementKind kind);
CompileWithRecompute compile_with_recompute(const scenario::LoadedScenario& scenario, scenario::PlacementKind kind,
                                            const cost::CostModel& cost);

// Placements `lacuna compare` runs for this scenario, in table order:
// Megatron baseline, Megatron balanced (interleaved-capable shapes), Optimus,
// heterogeneous (`lacuna compare` runs it colocated and non-colocated,
// deriving the layouts the scenario does not give: hetero_layouts.h), then
// Megatron encoder PP and Megatron layer split (always listed; where one
// cannot be built, compare says why).
std::vector<scenario::PlacementKind> applicable_placements(const scenario::LoadedScenario& scenario);

}  // namespace lacuna::placement
