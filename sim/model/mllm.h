// The multimodal parts of a model: vision encoders (ViT-style transformers
// reusing LayerShape with bidirectional attention), their projectors, the data
// mix, and the FLOP / parameter accounting of the whole MLLM. Conventions in
// docs/kernels.md ("Encoders and projectors").
#pragma once

#include <cstdint>
#include <vector>

#include "sim/model/layer.h"
#include "sim/model/layer_shape.h"
#include "sim/proto/scenario.pb.h"

namespace lacuna::model {

// How one module is split on one rank: what a LayerShape needs beyond the
// model's sizes.
struct ShardSpec {
  int64_t tp = 1;
  int64_t cp = 1;
  int64_t pp = 1;
  bool sequence_parallel = false;
};

// Images per sample of encoder `e` (images_per_sample, or derived from
// vision_token_share). The scenario must be validated.
int64_t images_per_sample(const scenario::Scenario& spec, int e);
// Tokens per image entering encoder `e` (its transformer.seq_length).
int64_t encoder_tokens_per_image(const scenario::Scenario& spec, int e);
// LLM sequence positions encoder `e` fills per sample, after the projector's
// token merge: images × tokens per image / token_merge.
int64_t vision_tokens_per_sample(const scenario::Scenario& spec, int e);
// Over all encoders.
int64_t total_vision_tokens_per_sample(const scenario::Scenario& spec);

// One layer of encoder `e` as one rank sees a microbatch of `samples` samples:
// micro_batch = samples × images per sample, seq_length = tokens per image,
// causal = false, the encoder's own sizes, split by `shard`.
LayerShape encoder_layer_shape(const scenario::Scenario& spec, int e, int64_t samples, const ShardSpec& shard);

// Pixel values per patch token: 3 channels × 14 × 14 (ViT-22B's and
// InternViT's patch size; the encoder FLOP convention's 588).
inline constexpr int64_t kPatchPixels = 3 * 14 * 14;

// Patch embedding of encoder `e` (a Linear over 3·14·14 pixel values per token,
// as ViT's conv with stride = kernel), forward and backward (W only: the
// pixels need no gradient). Replicated over TP: every TP rank runs the whole
// GEMM; under SP the backward first all-gathers the sequence-sharded gradient.
std::vector<Step> patch_embedding_forward(const LayerShape& encoder);
std::vector<Step> patch_embedding_backward(const LayerShape& encoder);

// The projector of encoder `e` for `samples` samples on one rank: input
// tokens (after the merge, CP-local), widths and the TP split (column- then
// row-parallel like an MLP; with TP the output is all-reduced, or
// reduce-scattered with SP).
struct ProjectorShape {
  int64_t tokens = 1;       // LLM tokens produced (per rank's CP share)
  int64_t in_width = 1;     // h_enc × token_merge
  int64_t hidden = 1;       // h_llm
  int64_t num_layers = 2;   // 1 or 2 linears
  int64_t tp = 1;
  bool sequence_parallel = false;
  // Whether the backward computes (and TP-reduces) FC1's input gradient: false
  // for a frozen encoder, whose output needs no gradient (the projector's own
  // weights are still trained).
  bool input_grad = true;
};
ProjectorShape projector_shape(const scenario::Scenario& spec, int e, int64_t samples, const ShardSpec& shard);
std::vector<Step> projector_forward(const ProjectorShape& p);
std::vector<Step> projector_backward(const ProjectorShape& p);
int64_t projector_parameters(const ProjectorShape& p);        // on one rank
Bytes projector_activation_bytes(const ProjectorShape& p);  // kept per microbatch
// The encoder's final norm after its last layer (on the last encoder stage),
// over the rank's SP share of the tokens; its parameters (replicated).
std::vector<Step> encoder_final_norm_forward(const LayerShape& encoder);
std::vector<Step> encoder_final_norm_backward(const LayerShape& encoder);
int64_t encoder_final_norm_parameters(const scenario::Scenario& spec, int e);
// Parameters of one encoder layer on one rank of `shard`.
int64_t encoder_layer_parameters(const scenario::Scenario& spec, int e, const ShardSpec& shard);
// Patch embedding parameters (replicated over TP): 588·h + h (bias), plus the
// tokens-per-image × h position table when the encoder's position_embedding
// is POSITION_LEARNED.
int64_t patch_embedding_parameters(const scenario::Scenario& spec, int e);

// Whole encoder `e` unsharded: layers + patch embedding + final norm +
// projector.
int64_t encoder_parameters(const scenario::Scenario& spec, int e);

// Model FLOPs of encoder `e` (its projector included) per iteration of
// `global_batch` samples, in the heterogeneous-parallelism paper's convention:
// per layer 2·tokens·(4h² + 2h·ffn) linear + 4·images·s²·h attention
// (non-causal), patch embedding 2·tokens·588·h, projector
// 2·llm_tokens·(in_width·h + h²); ×3 (forward + backward), encoder ×1 when
// frozen (its projector stays ×3).
double encoder_model_flops_per_iteration(const scenario::Scenario& spec, int e, int64_t global_batch);
// Encoder FLOPs actually executed (adds full recompute's repeated forward
// when the encoder's layout recomputes).
// `recomputed_layers`: how many of its layers recompute (block recompute);
// -1 every layer.
double encoder_hardware_flops_per_iteration(const scenario::Scenario& spec, int e, int64_t global_batch,
                                            scenario::Recompute recompute, int64_t recomputed_layers = -1);

// Bytes of the vision embeddings that cross the encoder → LLM boundary for
// `samples` samples, all encoders: samples × vision tokens × h_llm × 2 (bf16).
// The gradient going back has the same size.
int64_t boundary_bytes(const scenario::Scenario& spec, int64_t samples);

}  // namespace lacuna::model
