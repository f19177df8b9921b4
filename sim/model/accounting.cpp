#include "sim/model/accounting.h"

#include "sim/model/model_internal.h"
#include "sim/model/moe.h"

namespace lacuna::model {
namespace {

using internal::norm_parameters;

// Keys each query is counted against in model FLOPs: the whole sequence (the
// Megatron / SAR convention counts the full s × s square, causal or not), or
// a sliding window's width (the band counted in full the same way).
double key_span(const LayerShape& s) {
  const int64_t span = s.attention_window > 0 && s.attention_window < s.seq_length ? s.attention_window : s.seq_length;
  return static_cast<double>(span);
}

// MoE layers of the stack (docs/moe.md#model-flops).
int64_t moe_layers(const LayerShape& s, int64_t num_layers) {
  int64_t n = 0;
  for (int64_t l = 0; l < num_layers; ++l) n += s.moe.is_moe_layer(l) ? 1 : 0;
  return n;
}

// Forward model FLOPs the MoE MLP adds over the dense one, per MoE layer:
// MFU counts activated parameters (top_k routed experts, the shared
// experts and the router) instead of the dense MLP.
double moe_flops_delta(const LayerShape& s) {
  const double t = static_cast<double>(s.tokens()), h = static_cast<double>(s.hidden);
  const double dense = 2.0 * t * (h * static_cast<double>(s.fc1_width()) + static_cast<double>(s.ffn_per_rank()) * h);
  return moe_mlp_model_flops_forward(s) - dense;
}

// The whole stack's forward model FLOPs.
double stack_forward(const LayerShape& one, int64_t num_layers) {
  double f = static_cast<double>(num_layers) * layer_model_flops_forward(one);
  if (one.moe.enabled()) f += static_cast<double>(moe_layers(one, num_layers)) * moe_flops_delta(one);
  return f;
}

}  // namespace

int64_t layer_sp_parameters(const LayerShape& s) {
  const int64_t norms = (s.parallel_attention_mlp ? 1 : 2) * norm_parameters(s);
  const int64_t row_biases = s.linear_bias ? (s.parallel_attention_mlp ? 1 : 2) * s.hidden : 0;
  return norms + row_biases;
}

int64_t final_norm_parameters(const LayerShape& s) { return norm_parameters(s); }

int64_t layer_parameters(const LayerShape& s) {
  const int64_t h = s.hidden;
  const int64_t b = s.linear_bias ? 1 : 0;
  const int64_t qkv = h * s.qkv_width() + b * s.qkv_width();
  const int64_t proj = s.q_width() * h + b * h;  // row-parallel: bias replicated
  const int64_t fc1 = h * s.fc1_width() + b * s.fc1_width();
  const int64_t fc2 = s.ffn_per_rank() * h + b * h;
  const int64_t norms = (s.parallel_attention_mlp ? 1 : 2) * norm_parameters(s);
  return qkv + proj + fc1 + fc2 + norms;
}

int64_t embedding_parameters(const LayerShape& s) {
  return s.vocab_per_rank() * s.hidden + (s.learned_positions ? s.seq_length * s.hidden : 0);
}

int64_t head_parameters(const LayerShape& s) {
  return (s.head_has_output_weights() ? s.vocab_per_rank() * s.hidden : 0) + norm_parameters(s);
}

int64_t model_parameters(const LayerShape& s, int64_t num_layers) {
  const LayerShape full = unsharded(s, s.micro_batch);
  const int64_t output = full.untied_output ? full.vocab * full.hidden : 0;
  int64_t moe = 0;
  if (full.moe.enabled()) {
    // Every expert once: the whole model's experts, unsplit.
    LayerShape all = full;
    all.moe.ep = 1;
    all.moe.expert_tp = 1;
    moe = moe_layers(full, num_layers) * (moe_mlp_parameters(all) - dense_mlp_parameters(full));
  }
  return num_layers * layer_parameters(full) + moe + embedding_parameters(full) + output + norm_parameters(full);
}

double layer_model_flops_forward(const LayerShape& s) {
  const double t = static_cast<double>(s.tokens());
  const double h = static_cast<double>(s.hidden);
  const double linear = 2.0 * t *
                        (h * static_cast<double>(s.qkv_width()) + static_cast<double>(s.q_width()) * h +
                         h * static_cast<double>(s.fc1_width()) + static_cast<double>(s.ffn_per_rank()) * h);
  // QKᵀ and P·V over the full s × s score matrix (or the window's band).
  const double attention = 4.0 * t * key_span(s) * static_cast<double>(s.q_width());
  return linear + attention;
}

double head_model_flops_forward(const LayerShape& s) {
  return 2.0 * static_cast<double>(s.tokens()) * static_cast<double>(s.hidden) *
         static_cast<double>(s.vocab_per_rank());
}

double model_flops_per_iteration(const LayerShape& s, int64_t num_layers, int64_t global_batch) {
  const LayerShape one = unsharded(s, 1);
  const double forward = stack_forward(one, num_layers) + head_model_flops_forward(one);
  return 3.0 * static_cast<double>(global_batch) * forward;
}

double hardware_flops_per_iteration(const LayerShape& s, int64_t num_layers, int64_t global_batch,
                                    scenario::Recompute recompute, int64_t recomputed_layers) {
  const LayerShape one = unsharded(s, 1);
  double repeated_per_layer = 0;
  if (recompute == scenario::RECOMPUTE_FULL) {
    // The average layer (MoE layers count their activated FLOPs).
    repeated_per_layer = num_layers > 0 ? stack_forward(one, num_layers) / static_cast<double>(num_layers) : 0;
  } else if (recompute == scenario::RECOMPUTE_SELECTIVE) {
    repeated_per_layer = 4.0 * static_cast<double>(one.tokens()) * key_span(one) * static_cast<double>(one.q_width());
  }
  const int64_t repeated_layers = recomputed_layers < 0 ? num_layers : recomputed_layers;
  return model_flops_per_iteration(s, num_layers, global_batch) +
         static_cast<double>(global_batch) * static_cast<double>(repeated_layers) * repeated_per_layer;
}

}  // namespace lacuna::model
