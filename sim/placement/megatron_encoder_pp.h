// Megatron-LM's encoder pipeline (placement MEGATRON_ENCODER_PP,
// docs/placements.md): `--encoder-pipeline-model-parallel-size` /
// `--encoder-tensor-model-parallel-size` of core_v0.9.0 – core_v0.13.1 put the
// vision encoder (and projector) on pipeline stages of its own, on extra ranks
// ahead of the LLM's, with the LLM's dp and cp; its last stage sends the
// projected embeddings to the LLM's first stage and 1F1B runs over encoder and
// LLM stages as one pipeline. In lacuna that is an encoder island of the
// heterogeneous compiler (graph-aware 1F1B: encoder stage j warms up with its
// distance to the last LLM stage, as stage j of one longer pipeline would),
// with Megatron's layout rules applied here.
#pragma once

#include "sim/scenario/scenario.h"

namespace lacuna::placement {

// The HETEROGENEOUS scenario Megatron's encoder pipeline amounts to: encoder
// 0's layout {encoder tp, cp, encoder pp, dp} on the ranks after the LLM's,
// sequence parallel as the LLM's (where encoder tp > 1), recomputing as its
// layout says or, without one, as the LLM (every layer); an interleaved
// schedule becomes 1F1B (Megatron refuses virtual stages with an encoder on
// its own pipeline ranks). Throws lacuna::Error naming the field where
// Megatron would refuse the layout or the cluster has no room for it.
scenario::LoadedScenario encoder_pp_scenario(const scenario::LoadedScenario& scenario);

}  // namespace lacuna::placement
