// FP8 as Transformer Engine runs it under Megatron-Core (docs/fp8.md): the
// recipe resolved from the scenario, and the pass that turns a layer's BF16
// steps into the FP8 program: the linear layers' GEMMs tagged FP8 with 1-byte
// operands, the cast (and transpose) kernels before them, current scaling's
// amax kernels and their TP all-reduces, FP8 all-gathers under sequence
// parallelism. Attention, norms, softmax, activations and residuals stay BF16.
#pragma once

#include <vector>

#include "sim/model/fp8_plan.h"
#include "sim/model/layer.h"
#include "sim/model/layer_shape.h"
#include "sim/proto/scenario.pb.h"

namespace lacuna::model {

// training.fp8 with every field set: the recipe from the software when unset
// (Megatron-Core's --fp8-recipe default, delayed), the switches from the
// recipe's defaults. Meaningful only for precision FP8 (validated).
scenario::Fp8 resolve_fp8(const scenario::Scenario& spec);

// The plan a layer is built with: recipe UNSPECIFIED unless precision is FP8.
Fp8Plan fp8_plan(const scenario::Scenario& spec);

// GEMM roles of TE linear layers that run FP8 (QKV, projection, FC1, FC2,
// routed and shared experts). The router, the logits GEMM and the unfused
// attention's batched GEMMs stay BF16.
bool fp8_linear_role(ir::KernelRole role);

// The layer's steps rewritten for s.fp8 (unchanged when !s.fp8.any()).
std::vector<Step> apply_fp8(const LayerShape& s, std::vector<Step> steps);

// One cast of `elements` bf16 values to FP8 writing `copies` FP8 copies
// (rowwise and / or columnwise-transposed) with the recipe's scales:
// read 2 B, write 1 B per copy per element, plus per copy 4 B per tensor
// (per-tensor recipes), 4 B per 128 elements (blockwise 1×128 tiles) or 1 B
// per 32 elements (MXFP8 E8M0). Shape [elements, 2 + copies].
Kernel fp8_cast(scenario::Fp8Recipe recipe, ir::Phase phase, int64_t elements, int copies);
double fp8_scale_bytes(scenario::Fp8Recipe recipe, int64_t elements);

// Current scaling's amax pass over a bf16 tensor (read 2 B per element).
Kernel fp8_amax(ir::Phase phase, int64_t elements);

// Delayed scaling's amax reduction (docs/fp8.md#delayed-scaling-amax-reduction).
// Megatron-Core wraps each model chunk's TransformerBlock forward in one
// fp8_autocast under delayed scaling (transformer_block.py,
// use_outer_quantization_context). Transformer Engine registers every FP8
// module's amaxes once in a global buffer keyed by recipe and group
// (quantization.py add_fp8_tensors_to_global_buffer), and
// reduce_and_update_fp8_tensors all-reduces (MAX) that whole buffer over the
// amax group synchronously (async_op=False), then runs one fused
// amax-history and scale update. Forward: when the outermost autocast exits.
// Backward: at the end of the backward of the chunk's first FP8 module.
// Whether the plan runs it: delayed scaling with an FP8 linear GEMM.
bool fp8_delayed_amax_reduction(const Fp8Plan& p);
// TE GEMMs (modules' num_gemms) of `s`'s layer that run FP8: QKV, projection,
// FC1, FC2; in a MoE layer one per local expert for FC1 and FC2, plus the
// shared experts'. 0 when no linear GEMM runs FP8.
int64_t fp8_layer_gemms(const LayerShape& s);
// Amaxes one reduction carries for `gemms` FP8 GEMMs on the rank: 3 per GEMM
// forward (input, weight, output), 2 backward (grad output, grad input)
// (TE module/base.py: num_gemms * 3 if fwd else num_gemms * 2).
int64_t fp8_delayed_amax_values(int64_t gemms, bool forward);
// The fused update after the reduction (TE
// fused_amax_and_scale_update_after_reduction): per amax, read the reduced
// amax, read and write its history row(s), read and write its scale: fp32,
// memory-bound. Shape [values, bytes per value].
Kernel fp8_amax_update(ir::Phase phase, int64_t values, int64_t history_len);

// Weights that a layer's FP8 GEMMs read on this rank (in·out of each FP8
// linear layer): what is cast once per step, and gathered in FP8. `expert`:
// the routed experts' (EP-sharded, gathered over expert DP), `dense` the rest.
struct Fp8Weights {
  int64_t dense = 0, expert = 0;
  int64_t total() const { return dense + expert; }
};
// Of `s` as it is (dense, or the MoE layer with s.moe_layer).
Fp8Weights fp8_layer_weights(const LayerShape& s);
// Of the LLM's layers [first, first + count), each dense or MoE as the
// model's layer pattern says (for_layer).
Fp8Weights fp8_layers_weights(const LayerShape& s, int64_t first, int64_t count);

// The once-per-step weight casts of `weights` FP8 weights (phase
// OPTIMIZER_STEP; TE casts them in the first microbatch and caches them,
// Megatron's set_is_first_microbatch). Without param_gather: the bf16
// weights to the copies fprop and dgrad read. With param_gather (distributed
// optimizer): the fp32 master shard of `shard` weights quantized to FP8
// (read 4, write 1 B: Megatron's quantize_param_shard) and, where a second
// copy is needed, the gathered FP8 weights' transpose / columnwise copy
// (read 1, write 1 B). Empty when no linear GEMM runs FP8.
std::vector<Kernel> fp8_weight_casts(const Fp8Plan& p, int64_t weights, int64_t shard);

// Weight memory FP8 adds for `weights` FP8 weights (negative: saves): TE
// keeps the FP8 copies the GEMMs read (rowwise, and the transpose /
// columnwise copy where needed) cached from the first microbatch; with
// param_gather the FP8 weights replace the bf16 ones (Megatron
// --fp8-param-gather). One rule for the compiler's memory baseline and the
// search's screen.
int64_t fp8_weight_memory_delta_bytes(const Fp8Plan& p, int64_t weights);

}  // namespace lacuna::model
