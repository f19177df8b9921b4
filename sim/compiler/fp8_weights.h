// FP8 weights of one pipeline rank (docs/fp8.md#weights): what the per-step
// weight casts touch and what the FP8 weight copies hold.
#pragma once

#include <cstdint>

#include "sim/compiler/stage_program.h"
#include "sim/core/units.h"

namespace lacuna::compiler {

// Weights read by FP8 GEMMs on rank in.pp_rank: those of its LLM layers (every
// model chunk; model::fp8_layers_weights). 0 when no linear GEMM runs FP8.
int64_t fp8_rank_weights(const StageInputs& in);

// Weight memory FP8 adds to the rank's bf16 weights (negative: saves): TE
// keeps the FP8 copies the GEMMs read (rowwise, and the transpose /
// columnwise copy where needed) cached from the first microbatch; with
// param_gather the FP8 weights replace the bf16 ones (Megatron --fp8-param-gather
// "keep the compute param in fp8").
Bytes fp8_weight_memory_delta(const StageInputs& in);

}  // namespace lacuna::compiler
