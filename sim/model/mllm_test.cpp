// Encoders, projectors and MLLM accounting (sim/model/mllm.h) against closed
// forms worked out by hand from the conventions in docs/kernels.md.
#include "sim/model/mllm.h"

#include <gtest/gtest.h>

#include <map>

#include "sim/model/accounting.h"

namespace lacuna::model {
namespace {

// A ViT-style encoder transformer: MHA, GELU, LayerNorm, bidirectional.
void set_vit(scenario::Transformer* t, int64_t layers, int64_t h, int64_t heads, int64_t ffn, int64_t tokens) {
  t->set_num_layers(layers);
  t->set_hidden_size(h);
  t->set_num_attention_heads(heads);
  t->set_ffn_hidden_size(ffn);
  t->set_seq_length(tokens);
  t->set_bidirectional_attention(true);
}

// ViT-22B (Dehghani et al. 2023: 48 layers, h 6144, MLP 24576, 48 heads,
// patch 14 at 224 px → 256 tokens, no biases on the QKV/MLP linears) feeding
// a GPT-175B-sized LLM at sequence 2048.
scenario::Scenario vit22b_gpt175b(int64_t images = 2) {
  scenario::Scenario spec;
  auto* llm = spec.mutable_model()->mutable_llm();
  llm->set_num_layers(96);
  llm->set_hidden_size(12288);
  llm->set_num_attention_heads(96);
  llm->set_ffn_hidden_size(4 * 12288);
  llm->set_seq_length(2048);
  llm->set_vocab_size(51200);
  auto* enc = spec.mutable_model()->add_encoders();
  set_vit(enc->mutable_transformer(), 48, 6144, 48, 24576, 256);
  enc->set_images_per_sample(images);
  return spec;
}

struct Sums {
  double flops = 0;
  double flops_b = 0;  // BACKWARD_INPUT matmuls
  double flops_w = 0;  // BACKWARD_WEIGHT matmuls
  int kernels = 0;
  std::vector<std::pair<ir::CollectiveKind, int64_t>> comms;  // in order
};

Sums sum(const std::vector<Step>& steps) {
  Sums out;
  for (const Step& st : steps) {
    if (const auto* k = std::get_if<Kernel>(&st)) {
      ++out.kernels;
      out.flops += k->flops;
      if (k->phase == ir::BACKWARD_INPUT) out.flops_b += k->flops;
      if (k->phase == ir::BACKWARD_WEIGHT) out.flops_w += k->flops;
      EXPECT_GT(k->bytes, 0);
      if (!k->is_matmul()) {
        EXPECT_EQ(k->flops, 0) << "memory-bound kernels carry bytes only";
      }
    } else {
      const auto& c = std::get<CommPoint>(st);
      EXPECT_EQ(c.group, CommGroup::kTp);
      out.comms.emplace_back(c.kind, c.bytes);
    }
  }
  return out;
}

using Comms = std::vector<std::pair<ir::CollectiveKind, int64_t>>;

TEST(MllmDataMix, ImagesPerSampleGivenOrDerivedFromTheTokenShare) {
  scenario::Scenario spec = vit22b_gpt175b(3);
  EXPECT_EQ(images_per_sample(spec, 0), 3);
  EXPECT_EQ(encoder_tokens_per_image(spec, 0), 256);
  EXPECT_EQ(vision_tokens_per_sample(spec, 0), 768);

  // The heterogeneous-parallelism paper's 1B encoder (1024 tokens per image)
  // at LLM sequence 8192 and a 50 % vision share: 0.5 · 8192 / 1024 = 4.
  scenario::Scenario share;
  share.mutable_model()->mutable_llm()->set_seq_length(8192);
  share.mutable_model()->mutable_llm()->set_hidden_size(5120);
  auto* enc = share.mutable_model()->add_encoders();
  set_vit(enc->mutable_transformer(), 40, 1408, 16, 6144, 1024);
  enc->set_vision_token_share(0.5);
  EXPECT_EQ(images_per_sample(share, 0), 4);
  EXPECT_EQ(vision_tokens_per_sample(share, 0), 4096);
  // 87.5 %: 7 images (0.875 is exact in binary; 0.7 below is not).
  enc->set_vision_token_share(0.875);
  EXPECT_EQ(images_per_sample(share, 0), 7);
  // A 4× merge fits four times the images in the same share: 0.5 · 8192 · 4 /
  // 1024 = 16 images, still 4096 LLM positions.
  enc->set_vision_token_share(0.5);
  enc->mutable_projector()->set_token_merge(4);
  EXPECT_EQ(images_per_sample(share, 0), 16);
  EXPECT_EQ(vision_tokens_per_sample(share, 0), 4096);
  // A share with no exact binary value still gives the whole count validation
  // accepted: 0.7 · 8192 · 5 / 1024 = 28.
  enc->set_vision_token_share(0.7);
  enc->mutable_projector()->set_token_merge(5);
  share.mutable_model()->mutable_llm()->set_seq_length(8192);
  enc->mutable_transformer()->set_seq_length(1024);
  EXPECT_EQ(images_per_sample(share, 0), 28);

  // Two branches add up.
  scenario::Scenario two = vit22b_gpt175b(2);
  auto* second = two.mutable_model()->add_encoders();
  set_vit(second->mutable_transformer(), 24, 1024, 16, 4096, 576);
  second->set_images_per_sample(1);
  second->mutable_projector()->set_token_merge(4);
  EXPECT_EQ(total_vision_tokens_per_sample(two), 2 * 256 + 576 / 4);
}

TEST(MllmBoundary, SamplesTimesVisionTokensTimesLlmHiddenInBf16) {
  scenario::Scenario spec = vit22b_gpt175b(2);
  EXPECT_EQ(boundary_bytes(spec, 4), int64_t{4} * 512 * 12288 * 2);
  auto* second = spec.mutable_model()->add_encoders();
  set_vit(second->mutable_transformer(), 24, 1024, 16, 4096, 576);
  second->set_images_per_sample(1);
  second->mutable_projector()->set_token_merge(4);
  EXPECT_EQ(boundary_bytes(spec, 3), int64_t{3} * (512 + 144) * 12288 * 2);
}

TEST(MllmEncoderShape, ImagesAreTheBatchAttentionIsBidirectional) {
  scenario::Scenario spec = vit22b_gpt175b(3);
  const LayerShape s = encoder_layer_shape(spec, 0, 2, {.tp = 4, .cp = 2, .pp = 8, .sequence_parallel = true});
  EXPECT_EQ(s.micro_batch, 6);
  EXPECT_EQ(s.seq_length, 256);
  EXPECT_EQ(s.seq_per_rank(), 128);
  EXPECT_EQ(s.hidden, 6144);
  EXPECT_EQ(s.heads, 48);
  EXPECT_EQ(s.kv_heads, 48) << "kv heads default to the heads (MHA)";
  EXPECT_EQ(s.ffn_hidden, 24576);
  EXPECT_EQ(s.vocab, 1);
  EXPECT_FALSE(s.causal);
  EXPECT_EQ(s.activation, scenario::GELU);
  EXPECT_EQ(s.norm, scenario::LAYERNORM);
  EXPECT_EQ(s.tp, 4);
  EXPECT_EQ(s.cp, 2);
  EXPECT_EQ(s.pp, 8);
  EXPECT_TRUE(s.sequence_parallel);
  EXPECT_FALSE(s.untied_output);
  // SP means nothing without TP.
  EXPECT_FALSE(encoder_layer_shape(spec, 0, 1, {.tp = 1, .sequence_parallel = true}).sequence_parallel);
  // The encoder's own settings carry over.
  auto* t = spec.mutable_model()->mutable_encoders(0)->mutable_transformer();
  t->set_num_kv_heads(8);
  t->set_activation(scenario::SWIGLU);
  t->set_norm(scenario::RMSNORM);
  t->set_linear_bias(true);
  t->set_hidden_dropout(0.1);
  t->set_attention_kernel(scenario::Transformer::ATTENTION_UNFUSED);
  const LayerShape g = encoder_layer_shape(spec, 0, 1, {});
  EXPECT_EQ(g.kv_heads, 8);
  EXPECT_EQ(g.activation, scenario::SWIGLU);
  EXPECT_EQ(g.norm, scenario::RMSNORM);
  EXPECT_TRUE(g.linear_bias);
  EXPECT_DOUBLE_EQ(g.hidden_dropout, 0.1);
  EXPECT_TRUE(g.unfused_attention);
}

TEST(MllmEncoderShape, LayerKernelsAreTheNonCausalLayer) {
  scenario::Scenario spec = vit22b_gpt175b(2);
  const LayerShape s = encoder_layer_shape(spec, 0, 2, {});
  const double t = 4 * 256, h = 6144, ffn = 24576, sq = 256;
  // Forward kernels of a tp = 1 shard: the model-FLOP convention exactly
  // (linear 2·t·(4h² + 2h·ffn) + attention 4·images·s²·h).
  const double fwd = 2 * t * (4 * h * h + 2 * h * ffn) + 4 * 4 * sq * sq * h;
  EXPECT_DOUBLE_EQ(sum(layer_forward(s)).flops, fwd);
  EXPECT_DOUBLE_EQ(layer_model_flops_forward(s), fwd);
}

TEST(MllmFlops, Vit22bPerTokenMatchesThePaperConvention) {
  // Per image token and layer, forward: 2·(4h² + 2h·ffn) + 4·s·h.
  const double h = 6144, ffn = 24576, s = 256, l = 48;
  const double per_token_layer = 2 * (4 * h * h + 2 * h * ffn) + 4 * s * h;
  EXPECT_DOUBLE_EQ(per_token_layer, 912'261'120.0);  // ≈ 0.91 GFLOP, by hand
  const double patch_per_token = 2 * 588 * h;
  const double llm_h = 12288;
  const int64_t images = 2, batch = 1536;
  const double tokens = static_cast<double>(images) * s;  // per sample; no merge
  const double projector = 2 * tokens * (h * llm_h + llm_h * llm_h);
  const double expected = batch * (3 * tokens * (l * per_token_layer + patch_per_token) + 3 * projector);
  scenario::Scenario spec = vit22b_gpt175b(images);
  EXPECT_DOUBLE_EQ(encoder_model_flops_per_iteration(spec, 0, batch), expected);
  // Linear in the global batch.
  EXPECT_DOUBLE_EQ(encoder_model_flops_per_iteration(spec, 0, 2 * batch), 2 * expected);
}

TEST(MllmFlops, FrozenEncoderCountsOneForwardButTheProjectorStaysTrained) {
  scenario::Scenario spec = vit22b_gpt175b(2);
  const double h = 6144, ffn = 24576, s = 256, l = 48, llm_h = 12288, tokens = 512;
  const double encoder_fwd = tokens * (l * (2 * (4 * h * h + 2 * h * ffn) + 4 * s * h) + 2 * 588 * h);
  const double projector_fwd = 2 * tokens * (h * llm_h + llm_h * llm_h);
  const double trained = encoder_model_flops_per_iteration(spec, 0, 8);
  spec.mutable_model()->mutable_encoders(0)->set_frozen(true);
  const double frozen = encoder_model_flops_per_iteration(spec, 0, 8);
  EXPECT_DOUBLE_EQ(trained, 8 * (3 * encoder_fwd + 3 * projector_fwd));
  EXPECT_DOUBLE_EQ(frozen, 8 * (encoder_fwd + 3 * projector_fwd));
  EXPECT_DOUBLE_EQ(trained - frozen, 8 * 2 * encoder_fwd);
  // Nothing is recomputed without a backward.
  EXPECT_DOUBLE_EQ(encoder_hardware_flops_per_iteration(spec, 0, 8, scenario::RECOMPUTE_FULL), frozen);
}

TEST(MllmFlops, ProjectorWithMergeAndOneLayer) {
  // 1B-class encoder (h 1408) into a 14B-class LLM (h 5120), 4 images of 1024
  // tokens merged 4:1 → 1024 LLM tokens per sample, in_width 4·1408.
  scenario::Scenario spec;
  spec.mutable_model()->mutable_llm()->set_hidden_size(5120);
  spec.mutable_model()->mutable_llm()->set_seq_length(8192);
  auto* enc = spec.mutable_model()->add_encoders();
  set_vit(enc->mutable_transformer(), 40, 1408, 16, 6144, 1024);
  enc->set_images_per_sample(4);
  enc->mutable_projector()->set_token_merge(4);
  enc->set_frozen(true);  // isolate the projector: encoder ×1
  const double h = 1408, ffn = 6144, s = 1024, l = 40, img_tokens = 4096, llm_tokens = 1024, in = 4 * 1408,
               H = 5120;
  const double encoder_fwd = img_tokens * (l * (2 * (4 * h * h + 2 * h * ffn) + 4 * s * h) + 2 * 588 * h);
  EXPECT_DOUBLE_EQ(encoder_model_flops_per_iteration(spec, 0, 1),
                   encoder_fwd + 3 * 2 * llm_tokens * (in * H + H * H));
  enc->mutable_projector()->set_num_layers(1);
  EXPECT_DOUBLE_EQ(encoder_model_flops_per_iteration(spec, 0, 1), encoder_fwd + 3 * 2 * llm_tokens * in * H);
}

TEST(MllmFlops, GqaUsesTheRealQkvWidth) {
  scenario::Scenario spec = vit22b_gpt175b(1);
  spec.mutable_model()->mutable_encoders(0)->mutable_transformer()->set_num_kv_heads(8);
  spec.mutable_model()->mutable_encoders(0)->set_frozen(true);
  const double h = 6144, ffn = 24576, s = 256, l = 48, kv = 8 * 128, llm_h = 12288;
  const double linear = 2 * s * (h * (h + 2 * kv) + h * h + 2 * h * ffn);
  const double expected = l * (linear + 4 * s * s * h) + 2 * s * 588 * h + 3 * 2 * s * (h * llm_h + llm_h * llm_h);
  EXPECT_DOUBLE_EQ(encoder_model_flops_per_iteration(spec, 0, 1), expected);
}

TEST(MllmFlops, RecomputeAddsTheRepeatedForward) {
  scenario::Scenario spec = vit22b_gpt175b(2);
  const double h = 6144, ffn = 24576, s = 256, l = 48, tokens = 512;
  const double model = encoder_model_flops_per_iteration(spec, 0, 4);
  EXPECT_DOUBLE_EQ(encoder_hardware_flops_per_iteration(spec, 0, 4, scenario::RECOMPUTE_NONE), model);
  EXPECT_DOUBLE_EQ(encoder_hardware_flops_per_iteration(spec, 0, 4, scenario::RECOMPUTE_FULL),
                   model + 4 * l * tokens * (2 * (4 * h * h + 2 * h * ffn) + 4 * s * h));
  EXPECT_DOUBLE_EQ(encoder_hardware_flops_per_iteration(spec, 0, 4, scenario::RECOMPUTE_SELECTIVE),
                   model + 4 * l * tokens * 4 * s * h);
}

TEST(MllmParameters, Vit22bIsTwentyOnePointSevenBillion) {
  scenario::Scenario spec = vit22b_gpt175b();
  const int64_t h = 6144, ffn = 24576, l = 48, H = 12288;
  // Per layer: QKV + out projection 4h², MLP 2h·ffn, two LayerNorms 2·2h.
  EXPECT_EQ(encoder_layer_parameters(spec, 0, {}), 4 * h * h + 2 * h * ffn + 4 * h);
  // ViT-22B itself runs attention and MLP in parallel off one LayerNorm.
  spec.mutable_model()->mutable_encoders(0)->mutable_transformer()->set_parallel_attention_mlp(true);
  const int64_t layer = 4 * h * h + 2 * h * ffn + 2 * h;
  EXPECT_EQ(encoder_layer_parameters(spec, 0, {}), layer);
  const int64_t patch = 588 * h + h;
  EXPECT_EQ(patch_embedding_parameters(spec, 0), patch);
  EXPECT_EQ(encoder_final_norm_parameters(spec, 0), 2 * h);
  const int64_t projector = (h * H + H) + (H * H + H);
  EXPECT_EQ(encoder_parameters(spec, 0), l * layer + patch + 2 * h + projector);
  // The transformer body alone is the published 21.7B (Dehghani et al. 2023,
  // "Scaling Vision Transformers to 22 Billion Parameters"; QK-LayerNorm's
  // 2·48·2·128 parameters not modelled).
  EXPECT_NEAR(static_cast<double>(l * layer), 21.74e9, 0.01e9);
  // Learned positions add a tokens-per-image × h table.
  spec.mutable_model()->mutable_encoders(0)->mutable_transformer()->set_position_embedding(
      scenario::Transformer::POSITION_LEARNED);
  EXPECT_EQ(patch_embedding_parameters(spec, 0), patch + 256 * h);
}

TEST(MllmParameters, TensorParallelSplitsLayerAndProjector) {
  scenario::Scenario spec = vit22b_gpt175b();
  spec.mutable_model()->mutable_encoders(0)->mutable_transformer()->set_linear_bias(true);
  const int64_t h = 6144, ffn = 24576, H = 12288, tp = 8;
  // Column-parallel biases split, row-parallel biases and norms replicated.
  EXPECT_EQ(encoder_layer_parameters(spec, 0, {.tp = tp}),
            (h * 3 * h + 3 * h) / tp + h * h / tp + h + (h * ffn + ffn) / tp + ffn * h / tp + h + 4 * h);
  const ProjectorShape p = projector_shape(spec, 0, 1, {.tp = tp});
  EXPECT_EQ(projector_parameters(p), (h * H + H) / tp + H / tp * H + H);
  ProjectorShape one = p;
  one.num_layers = 1;
  EXPECT_EQ(projector_parameters(one), (h * H + H) / tp);
}

TEST(MllmPatchEmbedding, OneGemmForwardOnlyTheWeightGradientBackward) {
  scenario::Scenario spec = vit22b_gpt175b(2);
  const LayerShape s = encoder_layer_shape(spec, 0, 3, {});
  const double tokens = 3 * 2 * 256, h = 6144;
  const auto fwd = patch_embedding_forward(s);
  ASSERT_EQ(fwd.size(), 1u);
  const auto& k = std::get<Kernel>(fwd[0]);
  EXPECT_EQ(k.op_class, ir::GEMM);
  EXPECT_EQ(k.role, ir::ROLE_EMBEDDING);
  EXPECT_EQ(k.shape, (std::vector<int64_t>{3 * 2 * 256, 6144, 588}));
  EXPECT_DOUBLE_EQ(k.flops, 2 * tokens * 588 * h);
  const Sums b = sum(patch_embedding_backward(s));
  EXPECT_EQ(b.kernels, 1);
  EXPECT_DOUBLE_EQ(b.flops_w, 2 * tokens * 588 * h);
  EXPECT_DOUBLE_EQ(b.flops_b, 0) << "pixels need no gradient";
  EXPECT_TRUE(b.comms.empty());
  // TP replicates it; with SP the gradient is gathered back first.
  const LayerShape sp = encoder_layer_shape(spec, 0, 3, {.tp = 4, .sequence_parallel = true});
  EXPECT_DOUBLE_EQ(sum(patch_embedding_forward(sp)).flops, 2 * tokens * 588 * h);
  EXPECT_TRUE(sum(patch_embedding_forward(sp)).comms.empty());
  EXPECT_EQ(sum(patch_embedding_backward(sp)).comms,
            (Comms{{ir::ALL_GATHER, static_cast<int64_t>(tokens * h * 2)}}));
  EXPECT_TRUE(sum(patch_embedding_backward(encoder_layer_shape(spec, 0, 3, {.tp = 4}))).comms.empty());
}

TEST(MllmProjector, ShapeFromTheScenario) {
  scenario::Scenario spec = vit22b_gpt175b(2);
  spec.mutable_model()->mutable_encoders(0)->mutable_projector()->set_token_merge(4);
  const ProjectorShape p = projector_shape(spec, 0, 3, {.tp = 8, .cp = 2, .sequence_parallel = true});
  EXPECT_EQ(p.tokens, 3 * 2 * 256 / 4 / 2);
  EXPECT_EQ(p.in_width, 4 * 6144);
  EXPECT_EQ(p.hidden, 12288);
  EXPECT_EQ(p.num_layers, 2) << "0 means the two-layer MLP";
  EXPECT_EQ(p.tp, 8);
  EXPECT_TRUE(p.sequence_parallel);
  EXPECT_TRUE(p.input_grad);
  EXPECT_FALSE(projector_shape(spec, 0, 1, {.tp = 1, .sequence_parallel = true}).sequence_parallel);
  spec.mutable_model()->mutable_encoders(0)->set_frozen(true);
  EXPECT_FALSE(projector_shape(spec, 0, 1, {}).input_grad);
}

ProjectorShape projector(int64_t tp, bool sp, int64_t layers = 2) {
  ProjectorShape p;
  p.tokens = 1024;
  p.in_width = 4 * 1408;
  p.hidden = 5120;
  p.num_layers = layers;
  p.tp = tp;
  p.sequence_parallel = sp;
  return p;
}

TEST(MllmProjector, KernelFlopsAreTheModelFlopsSplitOverTp) {
  const double t = 1024, in = 4 * 1408, H = 5120;
  const double fwd2 = 2 * t * (in * H + H * H), fwd1 = 2 * t * in * H;
  for (int64_t tp : {1, 2, 8}) {
    for (int64_t layers : {1, 2}) {
      const double fwd = (layers == 2 ? fwd2 : fwd1) / static_cast<double>(tp);
      ProjectorShape p = projector(tp, false, layers);
      EXPECT_DOUBLE_EQ(sum(projector_forward(p)).flops, fwd);
      const Sums b = sum(projector_backward(p));
      // Backward = 2× forward, half B (input gradients), half W.
      EXPECT_DOUBLE_EQ(b.flops_b, fwd);
      EXPECT_DOUBLE_EQ(b.flops_w, fwd);
      // Frozen encoder: FC1's input gradient is skipped.
      p.input_grad = false;
      const Sums f = sum(projector_backward(p));
      EXPECT_DOUBLE_EQ(f.flops_w, fwd);
      EXPECT_DOUBLE_EQ(f.flops_b, fwd - 2 * t * in * H / static_cast<double>(tp));
    }
  }
}

TEST(MllmProjector, TensorParallelCommunication) {
  const int64_t t = 1024, in = 4 * 1408, H = 5120;
  const int64_t in_bytes = t * in * 2, out_bytes = t * H * 2;
  // tp = 1: no communication at all.
  EXPECT_TRUE(sum(projector_forward(projector(1, false))).comms.empty());
  EXPECT_TRUE(sum(projector_backward(projector(1, false))).comms.empty());
  // Like an MLP: g all-reduces forward, f all-reduces dX backward.
  EXPECT_EQ(sum(projector_forward(projector(4, false))).comms, (Comms{{ir::ALL_REDUCE, out_bytes}}));
  EXPECT_EQ(sum(projector_backward(projector(4, false))).comms, (Comms{{ir::ALL_REDUCE, in_bytes}}));
  // SP: all-gather the input, reduce-scatter the output; backward the reverse.
  EXPECT_EQ(sum(projector_forward(projector(4, true))).comms,
            (Comms{{ir::ALL_GATHER, in_bytes}, {ir::REDUCE_SCATTER, out_bytes}}));
  EXPECT_EQ(sum(projector_backward(projector(4, true))).comms,
            (Comms{{ir::ALL_GATHER, out_bytes}, {ir::REDUCE_SCATTER, in_bytes}}));
  // One layer: the column-parallel output is gathered; its backward is a slice.
  EXPECT_EQ(sum(projector_forward(projector(4, false, 1))).comms, (Comms{{ir::ALL_GATHER, out_bytes}}));
  EXPECT_EQ(sum(projector_backward(projector(4, false, 1))).comms, (Comms{{ir::ALL_REDUCE, in_bytes}}));
  EXPECT_EQ(sum(projector_forward(projector(4, true, 1))).comms,
            (Comms{{ir::ALL_GATHER, in_bytes}, {ir::ALL_GATHER, out_bytes}}));
  // Frozen encoder: no input gradient, so nothing to reduce.
  ProjectorShape frozen = projector(4, false);
  frozen.input_grad = false;
  EXPECT_TRUE(sum(projector_backward(frozen)).comms.empty());
}

TEST(MllmProjector, BackwardIsInAutogradOrder) {
  std::vector<std::pair<ir::KernelRole, ir::Phase>> order;
  for (const Step& st : projector_backward(projector(2, false)))
    if (const auto* k = std::get_if<Kernel>(&st)) order.emplace_back(k->role, k->phase);
  const std::vector<std::pair<ir::KernelRole, ir::Phase>> expected = {
      {ir::ROLE_FC2, ir::BACKWARD_INPUT}, {ir::ROLE_FC2, ir::BACKWARD_WEIGHT}, {ir::ROLE_ACT, ir::BACKWARD_INPUT},
      {ir::ROLE_FC1, ir::BACKWARD_INPUT}, {ir::ROLE_FC1, ir::BACKWARD_WEIGHT}};
  EXPECT_EQ(order, expected);
  // The dX reduction sits between FC1's B and W (overlapping the W GEMM).
  const auto steps = projector_backward(projector(2, false));
  ASSERT_EQ(steps.size(), 6u);
  EXPECT_TRUE(std::holds_alternative<CommPoint>(steps[4]));
}

TEST(MllmProjector, ActivationBytesKeptPerMicrobatch) {
  const int64_t t = 1024, in = 4 * 1408, H = 5120;
  // FC1 input, GELU input and FC2 input (h/tp wide each).
  EXPECT_EQ(projector_activation_bytes(projector(1, false)).count(), t * in * 2 + 2 * t * H * 2);
  EXPECT_EQ(projector_activation_bytes(projector(4, false)).count(), t * in * 2 + 2 * t * (H / 4) * 2);
  // SP keeps FC1's input sequence-sharded.
  EXPECT_EQ(projector_activation_bytes(projector(4, true)).count(), t / 4 * in * 2 + 2 * t * (H / 4) * 2);
  EXPECT_EQ(projector_activation_bytes(projector(4, false, 1)).count(), t * in * 2);
}

TEST(MllmFinalNorm, MemoryBoundOverTheSequenceShare) {
  scenario::Scenario spec = vit22b_gpt175b(2);
  const LayerShape s = encoder_layer_shape(spec, 0, 1, {.tp = 4, .sequence_parallel = true});
  const auto fwd = encoder_final_norm_forward(s);
  ASSERT_EQ(fwd.size(), 1u);
  const auto& k = std::get<Kernel>(fwd[0]);
  EXPECT_EQ(k.op_class, ir::LAYERNORM);
  EXPECT_EQ(k.role, ir::ROLE_FINAL_NORM);
  EXPECT_DOUBLE_EQ(k.bytes, 512.0 / 4 * 6144 * 2 * 2);
  const auto bwd = encoder_final_norm_backward(s);
  ASSERT_EQ(bwd.size(), 1u);
  const auto& b = std::get<Kernel>(bwd[0]);
  EXPECT_EQ(b.phase, ir::BACKWARD_INPUT);
  EXPECT_DOUBLE_EQ(b.bytes, 512.0 / 4 * 6144 * 3 * 2);
}

}  // namespace
}  // namespace lacuna::model
