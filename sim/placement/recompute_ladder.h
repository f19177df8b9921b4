// One module's recompute ladder and what its rungs cost and keep
// (docs/memory-model.md, "Choosing the recompute"): the pieces the recompute
// search (recompute_fit.h) is built from.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/compiler/module_recompute.h"
#include "sim/cost/cost_model.h"
#include "sim/proto/program.pb.h"

namespace lacuna::placement {

using compiler::ModuleRecompute;

// A module's ladder with at most `chunk_layers` layers in a model chunk:
//   NONE, SELECTIVE, FULL of the first 1, 2, …, chunk_layers − 1 layers of
//   each chunk (Megatron's --recompute-method block), FULL of every layer.
std::vector<ModuleRecompute> recompute_ladder(int64_t chunk_layers);

// The rung of `r` on that ladder (FULL of N ≥ chunk_layers layers is FULL of
// every layer).
int32_t ladder_position(const ModuleRecompute& r, int64_t chunk_layers);

// Whether rung `b` keeps no more activation bytes of any layer than rung `a`
// between its forward and its backward: NONE keeps the most of every layer;
// SELECTIVE drops the attention scores (A_sel ≤ A_none); a recomputed layer
// keeps only its input (A_in ≤ A_sel); block N + 1 recomputes one layer more
// than block N. Not SELECTIVE → FULL of N < all layers: its other layers keep
// A_none, more than A_sel without FlashAttention.
bool keeps_no_more(const ModuleRecompute& a, const ModuleRecompute& b);

// Added time of a module's recompute: the cost model's time of the module's
// RECOMPUTE kernels, summed over every rank of the program (GPU time per
// iteration). Additive over modules.
int64_t recompute_time_ns(const ir::Program& program, int32_t module, const cost::CostModel& cost);

// The same for block recompute of the first `num_layers` layers of each chunk
// (0: every layer), read from `full`, a program in which the module
// recomputes every layer: the RECOMPUTE kernels of the first num_layers layers
// (by index) the module has in each (class, chunk). Equals recompute_time_ns
// of the block program whenever the layers' placement does not depend on
// the recompute.
int64_t block_recompute_time_ns(const ir::Program& full, int32_t module, int64_t num_layers,
                                const cost::CostModel& cost);

// The most layers of `module` one rank runs in one model chunk (distinct
// layer indices of its forward kernels per class and chunk); 0 if none.
int64_t max_chunk_layers(const ir::Program& program, int32_t module);

// Per class, the most bytes that recompute holds at once beyond what the
// layers keep: the re-materialised activations (RECOMPUTE kernels' positive
// memory deltas), each live from its kernel to the backward kernel of the
// same module, chunk, microbatch and layer that releases memory. -1 for a
// class with activation deltas on more than one stream (no bound).
std::vector<int64_t> recompute_transient_bytes(const ir::Program& program);

}  // namespace lacuna::placement
