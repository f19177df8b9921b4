// Scenario → program for any model: LLM-only scenarios go through
// compiler::compile; multimodal ones through their placement
// (docs/placements.md).
#pragma once

#include <vector>

#include "sim/proto/program.pb.h"
#include "sim/scenario/scenario.h"

namespace lacuna::placement {

// The scenario's own placement (placement.kind; LLM-only: plain compile).
ir::Program compile(const scenario::LoadedScenario& scenario);

// The same workload under another placement (`lacuna compare`). Throws
// lacuna::Error naming what is missing when `kind` does not apply.
ir::Program compile_as(const scenario::LoadedScenario& scenario, scenario::PlacementKind kind);

// Placements `lacuna compare` runs for this scenario, in table order:
// Megatron baseline, Megatron balanced (interleaved-capable shapes), Optimus,
// and heterogeneous when every encoder has a layout.
std::vector<scenario::PlacementKind> applicable_placements(const scenario::LoadedScenario& scenario);

}  // namespace lacuna::placement
