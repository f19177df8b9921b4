#include "sim/model/mllm.h"

#include <cmath>

#include "sim/model/accounting.h"
#include "sim/model/model_internal.h"

namespace lacuna::model {
namespace {

using ir::Phase;

using internal::d;

const scenario::Encoder& encoder(const scenario::Scenario& spec, int e) { return spec.model().encoders(e); }

// Unset fields mean the documented defaults: no merge, the LLaVA-1.5 two-layer
// MLP.
int64_t token_merge(const scenario::Encoder& enc) {
  return enc.projector().token_merge() > 0 ? enc.projector().token_merge() : 1;
}
int64_t projector_layers(const scenario::Encoder& enc) {
  return enc.projector().num_layers() > 0 ? enc.projector().num_layers() : 2;
}

using internal::norm_parameters;

// The projector's own parameter count for its widths: column-parallel
// Linear(in → h) with bias split over TP; for two layers a row-parallel
// Linear(h → h) whose bias is replicated (added after the reduction).
int64_t projector_parameters_of(int64_t in_width, int64_t h, int64_t layers, int64_t tp) {
  const int64_t fc1 = in_width * (h / tp) + h / tp;
  if (layers == 1) return fc1;
  return fc1 + (h / tp) * h + h;
}

// Forward FLOPs of one sample through the projector, unsharded.
double projector_flops_per_sample(const scenario::Scenario& spec, int e) {
  const auto& enc = encoder(spec, e);
  const double tokens = d(vision_tokens_per_sample(spec, e));
  const double in = d(enc.transformer().hidden_size() * token_merge(enc));
  const double h = d(spec.model().llm().hidden_size());
  return 2.0 * tokens * (in * h + (projector_layers(enc) == 2 ? h * h : 0.0));
}

// Patch embedding forward FLOPs of one sample: 2·tokens·588·h.
double patch_flops_per_sample(const scenario::Scenario& spec, int e) {
  const auto& t = encoder(spec, e).transformer();
  return 2.0 * d(images_per_sample(spec, e) * t.seq_length()) * d(kPatchPixels) * d(t.hidden_size());
}

// A TP collective of `bytes` at `phase` (nothing when tp = 1).
void add_mllm_tp(std::vector<Step>& st, int64_t tp, ir::CollectiveKind kind, int64_t bytes, Phase phase,
            ir::KernelRole consumer = ir::ROLE_UNSPECIFIED) {
  if (tp <= 1) return;
  CommPoint c;
  c.group = CommGroup::kTp;
  c.kind = kind;
  c.bytes = bytes;
  c.phase = phase;
  c.consumer.role = consumer;
  st.emplace_back(c);
}

}  // namespace

int64_t images_per_sample(const scenario::Scenario& spec, int e) {
  const auto& enc = encoder(spec, e);
  if (enc.images_per_sample() > 0) return enc.images_per_sample();
  // share × seq × merge / tokens per image; validation guarantees it is whole
  // (to 1e-9), so rounding only removes the binary-fraction error of `share`.
  const double images = enc.vision_token_share() * d(spec.model().llm().seq_length()) * d(token_merge(enc)) /
                        d(enc.transformer().seq_length());
  return static_cast<int64_t>(std::llround(images));
}

int64_t encoder_tokens_per_image(const scenario::Scenario& spec, int e) {
  return encoder(spec, e).transformer().seq_length();
}

int64_t vision_tokens_per_sample(const scenario::Scenario& spec, int e) {
  return images_per_sample(spec, e) * encoder_tokens_per_image(spec, e) / token_merge(encoder(spec, e));
}

int64_t total_vision_tokens_per_sample(const scenario::Scenario& spec) {
  int64_t total = 0;
  for (int e = 0; e < spec.model().encoders_size(); ++e) total += vision_tokens_per_sample(spec, e);
  return total;
}

LayerShape encoder_layer_shape(const scenario::Scenario& spec, int e, int64_t samples, const ShardSpec& shard) {
  const auto& t = encoder(spec, e).transformer();
  LayerShape s;
  // Every image is an independent sequence of patches: the attention batch is
  // the images, not the samples.
  s.micro_batch = samples * images_per_sample(spec, e);
  s.seq_length = t.seq_length();
  s.hidden = t.hidden_size();
  s.heads = t.num_attention_heads();
  s.kv_heads = t.num_kv_heads() > 0 ? t.num_kv_heads() : t.num_attention_heads();
  s.ffn_hidden = t.ffn_hidden_size();
  s.vocab = 1;  // no vocabulary: patch embedding instead of a token table, no LM head
  s.activation = t.activation() == scenario::ACTIVATION_UNSPECIFIED ? scenario::GELU : t.activation();
  s.norm = t.norm() == scenario::NORM_UNSPECIFIED ? scenario::LAYERNORM : t.norm();
  s.parallel_attention_mlp = t.parallel_attention_mlp();
  s.causal = false;  // ViT attends over all patches of an image
  s.linear_bias = t.linear_bias();
  s.learned_positions = t.position_embedding() == scenario::Transformer::POSITION_LEARNED;
  s.untied_output = false;
  s.unfused_attention = t.attention_kernel() == scenario::Transformer::ATTENTION_UNFUSED;
  s.hidden_dropout = t.hidden_dropout();
  s.attention_dropout = t.attention_dropout();
  s.tp = shard.tp > 0 ? shard.tp : 1;
  s.cp = shard.cp > 0 ? shard.cp : 1;
  s.pp = shard.pp > 0 ? shard.pp : 1;
  s.sequence_parallel = shard.sequence_parallel && s.tp > 1;
  apply_execution(s, spec);  // encoders run in the same software as the LLM
  return s;
}

std::vector<Step> patch_embedding_forward(const LayerShape& s) {
  std::vector<Step> st;
  // Conv2d(3, h, kernel = stride = 14) is exactly a GEMM of the flattened
  // patches [tokens, 588] with the [588, h] kernel; every TP rank computes it
  // whole (the weights are replicated). With SP the output is then sliced to
  // the rank's sequence share, a view without communication. The learned
  // position add and the bias ride the GEMM's epilogue.
  st.emplace_back(gemm(ir::ROLE_EMBEDDING, ir::FORWARD, s.tokens(), s.hidden, kPatchPixels));
  return st;
}

std::vector<Step> patch_embedding_backward(const LayerShape& s) {
  std::vector<Step> st;
  // With SP the first layer's gradient arrives sequence-sharded; the slice's
  // backward all-gathers it (Megatron's scatter_to_sequence_parallel_region)
  // before the weight gradient, which needs every token.
  if (s.sequence_parallel) {
    CommPoint c;
    c.group = CommGroup::kTp;
    c.kind = ir::ALL_GATHER;
    c.bytes = s.hidden_bytes();
    c.phase = ir::BACKWARD_INPUT;
    c.consumer.role = ir::ROLE_EMBEDDING;
    st.emplace_back(c);
  }
  // dW[588, h] = patchesᵀ·dY; no dgrad: pixels need no gradient.
  st.emplace_back(gemm(ir::ROLE_EMBEDDING, ir::BACKWARD_WEIGHT, kPatchPixels, s.hidden, s.tokens()));
  return st;
}

std::vector<Step> encoder_final_norm_forward(const LayerShape& s) {
  std::vector<Step> st;
  st.emplace_back(memory_bound(s.norm == scenario::RMSNORM ? ir::RMSNORM : ir::LAYERNORM, ir::ROLE_FINAL_NORM,
                               ir::FORWARD, {s.sp_tokens(), s.hidden}, d(s.sp_tokens() * s.hidden), 2));
  return st;
}

std::vector<Step> encoder_final_norm_backward(const LayerShape& s) {
  std::vector<Step> st;
  st.emplace_back(memory_bound(s.norm == scenario::RMSNORM ? ir::RMSNORM : ir::LAYERNORM, ir::ROLE_FINAL_NORM,
                               ir::BACKWARD_INPUT, {s.sp_tokens(), s.hidden}, d(s.sp_tokens() * s.hidden), 3));
  return st;
}

int64_t encoder_final_norm_parameters(const scenario::Scenario& spec, int e) {
  return norm_parameters(encoder_layer_shape(spec, e, 1, {}));
}

ProjectorShape projector_shape(const scenario::Scenario& spec, int e, int64_t samples, const ShardSpec& shard) {
  const auto& enc = encoder(spec, e);
  ProjectorShape p;
  const int64_t cp = shard.cp > 0 ? shard.cp : 1;
  p.tokens = samples * vision_tokens_per_sample(spec, e) / cp;
  p.in_width = enc.transformer().hidden_size() * token_merge(enc);
  p.hidden = spec.model().llm().hidden_size();
  p.num_layers = projector_layers(enc);
  p.tp = shard.tp > 0 ? shard.tp : 1;
  p.sequence_parallel = shard.sequence_parallel && p.tp > 1;
  p.input_grad = !enc.frozen();
  return p;
}

std::vector<Step> projector_forward(const ProjectorShape& p) {
  std::vector<Step> st;
  const int64_t h_tp = p.hidden / p.tp;
  const int64_t in_bytes = p.tokens * p.in_width * kBf16;
  const int64_t out_bytes = p.tokens * p.hidden * kBf16;
  // The merge (pixel shuffle) is a reshape of the encoder output. With SP the
  // encoder output is sequence-sharded over TP: the column-parallel FC1 needs
  // every token (Megatron's f operator, an all-gather under SP).
  if (p.sequence_parallel) add_mllm_tp(st, p.tp, ir::ALL_GATHER, in_bytes, ir::FORWARD, ir::ROLE_FC1);
  st.emplace_back(gemm(ir::ROLE_FC1, ir::FORWARD, p.tokens, h_tp, p.in_width));
  if (p.num_layers == 1) {
    // A single column-parallel linear leaves each rank with h/tp columns of
    // every token; the LLM needs all columns, so the output is gathered over
    // the hidden dimension (ColumnParallelLinear with gather_output). Under SP
    // the rank then keeps its sequence share of it, a slice.
    add_mllm_tp(st, p.tp, ir::ALL_GATHER, out_bytes, ir::FORWARD);
    return st;
  }
  st.emplace_back(memory_bound(ir::GELU, ir::ROLE_ACT, ir::FORWARD, {p.tokens * h_tp}, d(p.tokens * h_tp), 2));
  st.emplace_back(gemm(ir::ROLE_FC2, ir::FORWARD, p.tokens, p.hidden, h_tp));
  // Row-parallel FC2 leaves partial sums: Megatron's g operator.
  add_mllm_tp(st, p.tp, p.sequence_parallel ? ir::REDUCE_SCATTER : ir::ALL_REDUCE, out_bytes, ir::FORWARD);
  return st;
}

std::vector<Step> projector_backward(const ProjectorShape& p) {
  constexpr Phase kB = ir::BACKWARD_INPUT;
  constexpr Phase kW = ir::BACKWARD_WEIGHT;
  std::vector<Step> st;
  const int64_t h_tp = p.hidden / p.tp;
  const int64_t in_bytes = p.tokens * p.in_width * kBf16;
  const int64_t out_bytes = p.tokens * p.hidden * kBf16;
  // FC1's input gradient and its reduction (f operator backward: partial dX
  // of a column-parallel linear, all-reduced, or reduce-scattered back to the
  // sequence shards under SP), consumed by the encoder's final norm. Skipped
  // when the encoder is frozen: nothing upstream needs dX.
  auto fc1_dgrad = [&] {
    if (!p.input_grad) return;
    st.emplace_back(gemm(ir::ROLE_FC1, kB, p.tokens, p.in_width, h_tp));
    add_mllm_tp(st, p.tp, p.sequence_parallel ? ir::REDUCE_SCATTER : ir::ALL_REDUCE, in_bytes, kB);
  };
  if (p.num_layers == 1) {
    // The output all-gather's backward is a slice of dY (every rank holds the
    // whole gradient): no communication.
    fc1_dgrad();
    st.emplace_back(gemm(ir::ROLE_FC1, kW, p.in_width, h_tp, p.tokens));
    return st;
  }
  // g operator backward: identity without SP, an all-gather of the
  // sequence-sharded dY with SP.
  if (p.sequence_parallel) add_mllm_tp(st, p.tp, ir::ALL_GATHER, out_bytes, kB, ir::ROLE_FC2);
  st.emplace_back(gemm(ir::ROLE_FC2, kB, p.tokens, h_tp, p.hidden));
  st.emplace_back(gemm(ir::ROLE_FC2, kW, h_tp, p.hidden, p.tokens));
  st.emplace_back(memory_bound(ir::GELU, ir::ROLE_ACT, kB, {p.tokens * h_tp}, d(p.tokens * h_tp), 3));
  fc1_dgrad();
  st.emplace_back(gemm(ir::ROLE_FC1, kW, p.in_width, h_tp, p.tokens));
  return st;
}

int64_t projector_parameters(const ProjectorShape& p) {
  return projector_parameters_of(p.in_width, p.hidden, p.num_layers, p.tp);
}

Bytes projector_activation_bytes(const ProjectorShape& p) {
  // FC1's input for its weight gradient (under SP the sequence shard, as
  // Megatron keeps it and re-gathers in backward); for two layers also the
  // GELU input and the FC2 input (the GELU output), h/tp wide each.
  const int64_t fc1_input = (p.sequence_parallel ? p.tokens / p.tp : p.tokens) * p.in_width * kBf16;
  if (p.num_layers == 1) return Bytes(fc1_input);
  return Bytes(fc1_input + 2 * p.tokens * (p.hidden / p.tp) * kBf16);
}

int64_t encoder_layer_parameters(const scenario::Scenario& spec, int e, const ShardSpec& shard) {
  return layer_parameters(encoder_layer_shape(spec, e, 1, shard));
}

int64_t patch_embedding_parameters(const scenario::Scenario& spec, int e) {
  const auto& t = encoder(spec, e).transformer();
  const int64_t h = t.hidden_size();
  const bool learned = t.position_embedding() == scenario::Transformer::POSITION_LEARNED;
  return kPatchPixels * h + h + (learned ? t.seq_length() * h : 0);
}

int64_t encoder_parameters(const scenario::Scenario& spec, int e) {
  const auto& enc = encoder(spec, e);
  const int64_t layers = enc.transformer().num_layers() * encoder_layer_parameters(spec, e, {});
  const int64_t projector =
      projector_parameters_of(enc.transformer().hidden_size() * token_merge(enc), spec.model().llm().hidden_size(),
                              projector_layers(enc), 1);
  return layers + patch_embedding_parameters(spec, e) + encoder_final_norm_parameters(spec, e) + projector;
}

double encoder_model_flops_per_iteration(const scenario::Scenario& spec, int e, int64_t global_batch) {
  const auto& enc = encoder(spec, e);
  // One sample unsharded: micro_batch = its images, attention over the full
  // s × s (non-causal anyway), the real QKV width under GQA.
  const LayerShape one = encoder_layer_shape(spec, e, 1, {});
  const double encoder_forward =
      d(enc.transformer().num_layers()) * layer_model_flops_forward(one) + patch_flops_per_sample(spec, e);
  const double encoder_passes = enc.frozen() ? 1.0 : 3.0;
  return d(global_batch) * (encoder_passes * encoder_forward + 3.0 * projector_flops_per_sample(spec, e));
}

double encoder_hardware_flops_per_iteration(const scenario::Scenario& spec, int e, int64_t global_batch,
                                            scenario::Recompute recompute, int64_t recomputed_layers) {
  const double model = encoder_model_flops_per_iteration(spec, e, global_batch);
  // A frozen encoder runs no backward, so nothing is recomputed.
  if (encoder(spec, e).frozen()) return model;
  const LayerShape one = encoder_layer_shape(spec, e, 1, {});
  double repeated_per_layer = 0;
  if (recompute == scenario::RECOMPUTE_FULL) {
    repeated_per_layer = layer_model_flops_forward(one);
  } else if (recompute == scenario::RECOMPUTE_SELECTIVE) {
    repeated_per_layer = 4.0 * d(one.tokens()) * d(one.seq_length) * d(one.q_width());
  }
  const int64_t layers = recomputed_layers >= 0 ? recomputed_layers : encoder(spec, e).transformer().num_layers();
  return model + d(global_batch) * d(layers) * repeated_per_layer;
}

int64_t boundary_bytes(const scenario::Scenario& spec, int64_t samples) {
  return samples * total_vision_tokens_per_sample(spec) * spec.model().llm().hidden_size() * kBf16;
}

}  // namespace lacuna::model
