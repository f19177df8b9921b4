// Parameter counts and model FLOPs: what MFU and model-state memory are
// computed from. Conventions in docs/kernels.md.
#pragma once

#include <cstdint>

#include "sim/model/layer_shape.h"

namespace lacuna::model {

// Parameters one rank holds (TP shards, replicated norms and row-parallel
// biases counted in full). With tp = 1 these are the model's totals.
int64_t layer_parameters(const LayerShape& s);
// Token embedding slice (+ learned positions, replicated).
int64_t embedding_parameters(const LayerShape& s);
// Final norm + the output layer slice where the last stage holds one
// (s.head_has_output_weights()): untied, or tied with pp > 1, where Megatron
// keeps (and updates) a copy of the embedding on the last stage, so the
// per-rank count is the same tied or untied. Tied with pp = 1 the embedding
// stage's table is the output layer: the norm only.
int64_t head_parameters(const LayerShape& s);

// Parameters of one layer replicated across TP whose gradients, with sequence
// parallelism, are partial per TP rank and all-reduced over TP before the
// step (Megatron's _allreduce_layernorm_grads): the norms' weights (and
// biases) and the row-parallel linears' biases.
int64_t layer_sp_parameters(const LayerShape& s);
// The final norm's parameters (weight, and bias for LayerNorm).
int64_t final_norm_parameters(const LayerShape& s);

// Whole model, each distinct weight once: tied (Megatron's default) counts the
// vocab × hidden table once (PTD-P eq. 2's count; eq. 2 omits the final norm's
// 2h), untied twice (Hugging Face's count of Llama).
int64_t model_parameters(const LayerShape& s, int64_t num_layers);

// Forward model FLOPs of one layer for s.micro_batch sequences: matmuls only,
// attention counted as the full s² (Megatron / SAR convention, independent of
// causal masking and of what recompute re-executes). Per-rank with TP/CP.
double layer_model_flops_forward(const LayerShape& s);
// Forward logits GEMM: 2·tokens·h·V (per rank: V/tp).
double head_model_flops_forward(const LayerShape& s);

// MFU numerator for one iteration of `global_batch` sequences: 3 × forward
// (backward = 2 × forward). For GPT this is SAR eq. 7,
// 72·B·s·l·h²·(1 + s/(6h) + V/(12hl)).
double model_flops_per_iteration(const LayerShape& s, int64_t num_layers, int64_t global_batch);

// HFU numerator: model FLOPs plus the forward work recompute repeats, in the
// same convention (attention as the full s²). Full recompute repeats every
// layer's forward, which gives PTD-P eq. 3, 96·B·s·l·h²·(1 + s/(6h) +
// V/(16lh)); selective repeats the attention core, 4·B·s²·h per layer.
// `recomputed_layers`: how many of the layers recompute (block recompute,
// recompute_num_layers); -1: all of them.
double hardware_flops_per_iteration(const LayerShape& s, int64_t num_layers, int64_t global_batch,
                                    scenario::Recompute recompute, int64_t recomputed_layers = -1);

}  // namespace lacuna::model
