// The two Megatron-LM placements of a multimodal model (docs/placements.md):
// - baseline: every encoder (and projector) runs in the pre-process of the
//   LLM's first virtual stage, in the LLM's TP / CP / SP layout;
// - balanced: interleaved 1F1B over the encoder + projector + LLM layer chain,
//   split over pp × v virtual stages by dynamic programming on per-layer time;
// - layer split: the same chain split by layer count (encoder layers counted
//   as pipeline layers), in the scenario's schedule and virtual stages.
#pragma once

#include <vector>

#include "sim/compiler/module_recompute.h"
#include "sim/cost/cost_model.h"
#include "sim/proto/program.pb.h"
#include "sim/scenario/scenario.h"

namespace lacuna::placement {

// `kind` is MEGATRON_BASELINE, MEGATRON_BALANCED or MEGATRON_LAYER_SPLIT. `cost` times the layers
// for the balanced partition (unused by the baseline). `encoder_recompute`
// gives encoder e's recompute (one entry per encoder); empty: every encoder
// recomputes like the LLM (parallel.recompute, every layer).
ir::Program compile_megatron_mllm(const scenario::LoadedScenario& scenario, scenario::PlacementKind kind,
                                  const cost::CostModel& cost,
                                  const std::vector<compiler::ModuleRecompute>& encoder_recompute = {});

}  // namespace lacuna::placement
