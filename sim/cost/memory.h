// The memory model: what a rank holds. Formulas from Korthikanti et al.
// (SAR, "Reducing Activation Recomputation in Large Transformer Models") and
// Megatron-LM's distributed optimizer; see docs/memory-model.md.
#pragma once

#include <cstdint>

#include "sim/core/units.h"
#include "sim/proto/scenario.pb.h"

namespace lacuna::cost {

struct LayerActivationInputs {
  int64_t seq_length = 0;       // full sequence (before CP split)
  int64_t micro_batch = 0;
  int64_t hidden = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t ffn_hidden = 0;
  scenario::Activation activation = scenario::GELU;
  bool parallel_attention_mlp = false;
  int64_t tp = 1;
  int64_t cp = 1;
  bool sequence_parallel = false;
  scenario::Recompute recompute = scenario::RECOMPUTE_NONE;
  bool flash_attention = true;  // lacuna's attention kernel is FlashAttention-style
  // FP8 activation storage (docs/fp8.md#activation-memory): the linear
  // layers' saved inputs are the FP8 copies their casts made.
  bool fp8_gemm_inputs = false;
};

// Bytes one transformer layer keeps on one rank for one microbatch between its
// forward and its backward (16-bit activations).
Bytes layer_activation_bytes(const LayerActivationInputs& in);

struct ModelStateBytes {
  Bytes weights;    // 16-bit weights
  Bytes gradients;  // gradient buffer (fp32 main_grad unless kept in fp16)
  Bytes optimizer;  // fp32 master weights + Adam m, v (sharded over DP with ZeRO-1)
};

// Model state of a rank holding `parameters` parameters, replicated over `dp`
// data-parallel ranks (dp here includes CP, which also replicates weights).
// `grad_bytes`: bytes per parameter of the gradient buffer (4: fp32
// main_grad; 2 when gradients are kept in fp16).
ModelStateBytes model_state_bytes(int64_t parameters, int64_t dp, bool distributed_optimizer,
                                  int64_t grad_bytes = 4);

}  // namespace lacuna::cost
