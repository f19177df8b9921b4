// The kernels the execution switches change (docs/kernels.md#fused-kernels,
// #sliding-window, #optimizer-step): each switch adds or removes exactly the
// kernels and HBM bytes documented, derived here from the per-element bytes
// (bf16 activations: 2 B; 1-byte dropout masks; fp32 optimizer state: 4 B).
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "sim/model/accounting.h"
#include "sim/model/kernels.h"
#include "sim/model/layer.h"
#include "sim/model/layer_shape.h"

namespace lacuna::model {
namespace {

// b = 2, s = 128, h = 256, 8 heads of 32, ffn 1024, TP 2 with SP: t = 256
// GEMM tokens, t_sp = 128 tokens in the norm / residual region.
LayerShape small(bool sp = true) {
  LayerShape s;
  s.micro_batch = 2;
  s.seq_length = 128;
  s.hidden = 256;
  s.heads = 8;
  s.kv_heads = 8;
  s.ffn_hidden = 1024;
  s.vocab = 1000;
  s.activation = scenario::GELU;
  s.norm = scenario::LAYERNORM;
  s.linear_bias = true;
  s.tp = 2;
  s.sequence_parallel = sp;
  return s;
}
constexpr double kT = 2 * 128;         // GEMM tokens b·s
constexpr double kTsp = 2 * 128 / 2;   // norm / residual tokens with SP
constexpr double kH = 256;
constexpr double kFr = 1024 / 2;       // ffn per rank
constexpr double kE = kTsp * kH;       // residual-region elements (SP)

std::vector<Kernel> kernels(const std::vector<Step>& steps) {
  std::vector<Kernel> out;
  for (const Step& st : steps)
    if (const auto* k = std::get_if<Kernel>(&st)) out.push_back(*k);
  return out;
}

double bytes(const std::vector<Kernel>& ks) {
  double sum = 0;
  for (const Kernel& k : ks) sum += k.bytes;
  return sum;
}

int count(const std::vector<Kernel>& ks, ir::KernelRole role) {
  return static_cast<int>(std::count_if(ks.begin(), ks.end(), [&](const Kernel& k) { return k.role == role; }));
}

std::vector<Kernel> fwd(const LayerShape& s) { return kernels(layer_forward(s)); }
std::vector<Kernel> bwd(const LayerShape& s, scenario::Recompute r = scenario::RECOMPUTE_NONE) {
  return kernels(layer_backward(s, r));
}

// Same kernels (class, role, phase, shape) with the same bytes.
void expect_same(const std::vector<Kernel>& a, const std::vector<Kernel>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].op_class, b[i].op_class) << i;
    EXPECT_EQ(a[i].role, b[i].role) << i;
    EXPECT_EQ(a[i].phase, b[i].phase) << i;
    EXPECT_EQ(a[i].shape, b[i].shape) << i;
    EXPECT_DOUBLE_EQ(a[i].bytes, b[i].bytes) << i;
    EXPECT_DOUBLE_EQ(a[i].flops, b[i].flops) << i;
  }
}

// `b` is `a` with `extra` inserted (matched by role and phase, in order).
std::vector<Kernel> inserted(const std::vector<Kernel>& a, const std::vector<Kernel>& b) {
  std::vector<Kernel> extra;
  size_t i = 0;
  for (const Kernel& k : b) {
    if (i < a.size() && a[i].role == k.role && a[i].phase == k.phase && a[i].shape == k.shape &&
        a[i].bytes == k.bytes) {
      ++i;
      continue;
    }
    extra.push_back(k);
  }
  EXPECT_EQ(i, a.size()) << "the fused kernels are not all kept";
  return extra;
}

// ---------------------------------------------------------------- bias-GeLU

TEST(BiasGeluFusion, OffAddsTheBiasAddOverFc1OutputForwardOnly) {
  for (scenario::Activation act : {scenario::GELU, scenario::SWIGLU}) {
    SCOPED_TRACE(scenario::Activation_Name(act));
    LayerShape fused = small();
    fused.activation = act;
    LayerShape unfused = fused;
    unfused.bias_gelu_fusion = false;
    // FC1's output width: f_r, or gate + up (2·f_r) for SwiGLU.
    const double w1 = (act == scenario::SWIGLU ? 2 : 1) * kFr;
    const auto f = fwd(fused), u = fwd(unfused);
    const auto extra = inserted(f, u);
    ASSERT_EQ(extra.size(), 1u);
    EXPECT_EQ(extra[0].op_class, ir::ELEMENTWISE);
    EXPECT_EQ(extra[0].role, ir::ROLE_BIAS);
    EXPECT_EQ(extra[0].shape, (std::vector<int64_t>{static_cast<int64_t>(kT * w1)}));
    EXPECT_DOUBLE_EQ(extra[0].bytes, 2 * 2 * kT * w1);  // read + write, bf16
    EXPECT_DOUBLE_EQ(bytes(u) - bytes(f), 2 * 2 * kT * w1);
    // Right before the activation.
    const auto at = std::find_if(u.begin(), u.end(), [](const Kernel& k) { return k.role == ir::ROLE_BIAS; });
    ASSERT_NE(at + 1, u.end());
    EXPECT_EQ((at + 1)->role, ir::ROLE_ACT);
    // The activation's backward recomputes x + b: backward unchanged.
    expect_same(bwd(fused), bwd(unfused));
  }
}

TEST(BiasGeluFusion, WithoutLinearBiasesThereIsNothingToFuse) {
  LayerShape fused = small();
  fused.linear_bias = false;
  LayerShape unfused = fused;
  unfused.bias_gelu_fusion = false;
  expect_same(fwd(fused), fwd(unfused));
}

// ---------------------------------------------------------------- bias-dropout-add

struct ResidualDelta {
  int kernels_fwd, kernels_bwd;
  double bytes_fwd, bytes_bwd;
};

ResidualDelta residual_delta(LayerShape s) {
  LayerShape unfused = s;
  unfused.bias_dropout_fusion = false;
  const auto f = fwd(s), u = fwd(unfused), fb = bwd(s), ub = bwd(unfused);
  return {static_cast<int>(u.size() - f.size()), static_cast<int>(ub.size() - fb.size()), bytes(u) - bytes(f),
          bytes(ub) - bytes(fb)};
}

TEST(BiasDropoutFusion, OffRunsBiasDropoutAndAddSeparately) {
  // Per dropped branch and residual element e = t_sp·h:
  // fused forward: read branch + residual, write sum (3 × 2 B), + 1 B mask;
  // unfused: bias add (2 × 2 B), dropout (2 × 2 B + 1 B mask), add (3 × 2 B).
  // Backward, either way: the dropout's pass (2 + 1 + 2 B) and the add.
  // Sequential layer: two residuals of one branch each.
  LayerShape s = small();
  ResidualDelta d = residual_delta(s);  // no dropout: only the bias adds
  EXPECT_EQ(d.kernels_fwd, 2);
  EXPECT_DOUBLE_EQ(d.bytes_fwd, 2 * (2 * 2 * kE));
  EXPECT_EQ(d.kernels_bwd, 0);
  EXPECT_DOUBLE_EQ(d.bytes_bwd, 0);

  s.hidden_dropout = 0.1;
  d = residual_delta(s);
  EXPECT_EQ(d.kernels_fwd, 4);  // a bias add and a dropout per residual
  // (4 + 5 + 6) − (6 + 1) = 8 B per element, per residual.
  EXPECT_DOUBLE_EQ(d.bytes_fwd, 2 * 8 * kE);
  EXPECT_EQ(d.kernels_bwd, 2);  // the dropout's own pass per residual
  EXPECT_DOUBLE_EQ(d.bytes_bwd, 0);

  // Without linear biases: only the dropout separates.
  s.linear_bias = false;
  d = residual_delta(s);
  EXPECT_EQ(d.kernels_fwd, 2);
  EXPECT_DOUBLE_EQ(d.bytes_fwd, 2 * ((5 + 6) - (6 + 1)) * kE);
  s.hidden_dropout = 0;
  d = residual_delta(s);
  EXPECT_EQ(d.kernels_fwd, 0);
  EXPECT_DOUBLE_EQ(d.bytes_fwd, 0);
}

TEST(BiasDropoutFusion, ParallelAttentionMlpDropsBothBranchesIntoOneAdd) {
  // One residual of three operands (read 3, write 1) and two branches.
  LayerShape s = small();
  s.parallel_attention_mlp = true;
  s.hidden_dropout = 0.1;
  const ResidualDelta d = residual_delta(s);
  // Fused 4·2 + 2·1 B; unfused 2·(4 + 5) + 4·2 B per element.
  EXPECT_EQ(d.kernels_fwd, 4);
  EXPECT_DOUBLE_EQ(d.bytes_fwd, (2 * (4 + 5) + 8 - (8 + 2)) * kE);
  // Backward: fused 3·2 + 2·5 B, unfused 2 dropout passes of 5 B + the add's 6 B.
  EXPECT_EQ(d.kernels_bwd, 2);
  EXPECT_DOUBLE_EQ(d.bytes_bwd, 0);
}

TEST(BiasDropoutFusion, UnfusedKernelsCarryTheirOwnBytes) {
  LayerShape s = small();
  s.hidden_dropout = 0.1;
  s.bias_dropout_fusion = false;
  const auto f = fwd(s);
  const auto b = bwd(s);
  ASSERT_EQ(count(f, ir::ROLE_DROPOUT), 2);
  ASSERT_EQ(count(b, ir::ROLE_DROPOUT), 2);
  for (const auto* ks : {&f, &b})
    for (const Kernel& k : *ks) {
      if (k.role == ir::ROLE_DROPOUT) {
        EXPECT_DOUBLE_EQ(k.bytes, 5 * kE);
      }
      if (k.role == ir::ROLE_RESIDUAL_ATTN || k.role == ir::ROLE_RESIDUAL_MLP) {
        EXPECT_EQ(k.op_class, ir::RESIDUAL_ADD);
        EXPECT_DOUBLE_EQ(k.bytes, 6 * kE);
      }
    }
  // Forward bias adds over the residual region (the other ROLE_BIAS would be
  // FC1's, fused here).
  int bias = 0;
  for (const Kernel& k : f)
    if (k.role == ir::ROLE_BIAS) {
      ++bias;
      EXPECT_DOUBLE_EQ(k.bytes, 4 * kE);
    }
  EXPECT_EQ(bias, 2);
}

// ---------------------------------------------------------------- masked softmax

TEST(MaskedSoftmaxFusion, OffAddsTheMaskedFillAroundTheUnfusedSoftmax) {
  LayerShape fused = small();
  fused.unfused_attention = true;
  LayerShape unfused = fused;
  unfused.masked_softmax_fusion = false;
  // n = b·a_r = 2 · 4 score matrices of s × s.
  const double scores = 2.0 * 4 * 128 * 128;
  const auto f = fwd(fused), u = fwd(unfused);
  auto extra = inserted(f, u);
  ASSERT_EQ(extra.size(), 1u);
  EXPECT_EQ(extra[0].op_class, ir::ELEMENTWISE);
  EXPECT_EQ(extra[0].role, ir::ROLE_ATTN_SCALE_MASK);
  EXPECT_EQ(extra[0].shape, (std::vector<int64_t>{static_cast<int64_t>(scores), 5}));
  EXPECT_DOUBLE_EQ(extra[0].bytes, (2 + 1 + 2) * scores);  // read S and the mask, write
  EXPECT_DOUBLE_EQ(bytes(u) - bytes(f), 5 * scores);
  auto at = std::find_if(u.begin(), u.end(), [](const Kernel& k) { return k.role == ir::ROLE_ATTN_SCALE_MASK; });
  EXPECT_EQ((at + 1)->role, ir::ROLE_ATTN_SOFTMAX);  // before the softmax

  const auto fb = bwd(fused), ub = bwd(unfused);
  extra = inserted(fb, ub);
  ASSERT_EQ(extra.size(), 1u);
  EXPECT_EQ(extra[0].role, ir::ROLE_ATTN_SCALE_MASK);
  EXPECT_EQ(extra[0].phase, ir::BACKWARD_INPUT);
  EXPECT_DOUBLE_EQ(extra[0].bytes, 2 * 2 * scores);  // read, write
  at = std::find_if(ub.begin(), ub.end(), [](const Kernel& k) { return k.role == ir::ROLE_ATTN_SCALE_MASK; });
  ASSERT_NE(at, ub.begin());
  EXPECT_EQ((at - 1)->role, ir::ROLE_ATTN_SOFTMAX);  // after the softmax's backward

  // Selective recompute replays the unfused forward, masked_fill included.
  EXPECT_EQ(count(bwd(unfused, scenario::RECOMPUTE_SELECTIVE), ir::ROLE_ATTN_SCALE_MASK), 2);
}

TEST(MaskedSoftmaxFusion, FlashAttentionIgnoresIt) {
  LayerShape fused = small();
  LayerShape unfused = fused;
  unfused.masked_softmax_fusion = false;
  expect_same(fwd(fused), fwd(unfused));
  expect_same(bwd(fused), bwd(unfused));
}

// ---------------------------------------------------------------- LayerNorm / RMSNorm

TEST(FusedLayerNorm, OffAddsLayerNormsWeightGradientReduction) {
  // Two norms per layer, over e = t_sp·h elements each.
  LayerShape fused = small();
  LayerShape unfused = fused;
  unfused.fused_layer_norm = false;
  expect_same(fwd(fused), fwd(unfused));  // torch.nn.LayerNorm: one kernel forward
  const auto fb = bwd(fused), ub = bwd(unfused);
  const auto extra = inserted(fb, ub);
  ASSERT_EQ(extra.size(), 2u);
  for (const Kernel& k : extra) {
    EXPECT_EQ(k.op_class, ir::LAYERNORM);
    EXPECT_EQ(k.role, ir::ROLE_NORM_WEIGHT_GRAD);
    EXPECT_DOUBLE_EQ(k.bytes, 2 * 2 * kE);  // read x and dy again
  }
  EXPECT_DOUBLE_EQ(bytes(ub) - bytes(fb), 2 * 4 * kE);
}

TEST(FusedLayerNorm, OffRunsEagerRmsNormAsThreeKernelsEachWay) {
  LayerShape fused = small();
  fused.norm = scenario::RMSNORM;
  LayerShape unfused = fused;
  unfused.fused_layer_norm = false;
  // Per norm, forward: fused read + write (2·2 B); eager mean of squares
  // (read), normalise (read + write), scale (read + write): 5·2 B.
  const auto f = fwd(fused), u = fwd(unfused);
  EXPECT_EQ(u.size(), f.size() + 2 * 2);
  EXPECT_DOUBLE_EQ(bytes(u) - bytes(f), 2 * (5 - 2) * 2 * kE);
  // Backward: fused read x, dy, write dx (3·2 B); eager dw (read dy, x),
  // dy·w (read + write), dx (read x and d(x̂), write): 7·2 B.
  const auto fb = bwd(fused), ub = bwd(unfused);
  EXPECT_EQ(ub.size(), fb.size() + 2 * 2);
  EXPECT_DOUBLE_EQ(bytes(ub) - bytes(fb), 2 * (7 - 3) * 2 * kE);
  // The final norm through norm_kernels, over any token count.
  const double e = 100.0 * kH;
  EXPECT_DOUBLE_EQ(bytes(norm_kernels(unfused, ir::ROLE_FINAL_NORM, ir::FORWARD, false, 100)), 5 * 2 * e);
  EXPECT_DOUBLE_EQ(bytes(norm_kernels(unfused, ir::ROLE_FINAL_NORM, ir::BACKWARD_INPUT, true, 100)), 7 * 2 * e);
  EXPECT_DOUBLE_EQ(bytes(norm_kernels(fused, ir::ROLE_FINAL_NORM, ir::FORWARD, false, 100)), 2 * 2 * e);
  EXPECT_DOUBLE_EQ(bytes(norm_kernels(fused, ir::ROLE_FINAL_NORM, ir::BACKWARD_INPUT, true, 100)), 3 * 2 * e);
}

// ---------------------------------------------------------------- gradient accumulation

TEST(GradientAccumulationFusion, OffAddsOneMainGradAddPerWeightGemm) {
  // Per rank (tp 2): QKV h × 3h/2, projection h/2 × h, FC1 h × f_r, FC2 f_r × h.
  const std::vector<double> weights = {kH * 3 * kH / 2, kH / 2 * kH, kH * kFr, kFr * kH};
  double all = 0;
  for (double w : weights) all += w;
  for (bool fp32 : {true, false}) {
    SCOPED_TRACE(fp32 ? "fp32 main_grad" : "16-bit main_grad");
    const double g = fp32 ? 4 : 2;
    LayerShape fused = small();
    fused.grad_fp32 = fp32;
    LayerShape unfused = fused;
    unfused.gradient_accumulation_fusion = false;
    expect_same(fwd(fused), fwd(unfused));
    EXPECT_EQ(count(bwd(fused), ir::ROLE_GRAD_ACCUM), 0);
    const auto ub = bwd(unfused);
    EXPECT_EQ(inserted(bwd(fused), ub).size(), 4u);
    std::vector<double> seen;
    for (size_t i = 0; i < ub.size(); ++i) {
      const Kernel& k = ub[i];
      if (k.role != ir::ROLE_GRAD_ACCUM) continue;
      // Right after its weight-gradient GEMM [in, out, t], over in × out.
      ASSERT_GT(i, 0u);
      const Kernel& w = ub[i - 1];
      EXPECT_EQ(w.op_class, ir::GEMM);
      EXPECT_EQ(w.phase, ir::BACKWARD_WEIGHT);
      const double n = static_cast<double>(w.shape[0] * w.shape[1]);
      EXPECT_EQ(k.op_class, ir::ELEMENTWISE);
      EXPECT_EQ(k.phase, ir::BACKWARD_WEIGHT);
      EXPECT_EQ(k.shape, (std::vector<int64_t>{w.shape[0] * w.shape[1], static_cast<int64_t>(2 + 2 * g)}));
      // Read the 16-bit gradient (2) and the main_grad (g), write it (g).
      EXPECT_DOUBLE_EQ(k.bytes, ((2 + g) + g) * n);
      seen.push_back(n);
    }
    std::vector<double> want = weights;
    std::sort(want.begin(), want.end());
    std::sort(seen.begin(), seen.end());
    EXPECT_EQ(seen, want);
    EXPECT_DOUBLE_EQ(bytes(ub) - bytes(bwd(fused)), (2 + 2 * g) * all);
  }
}

TEST(GradientAccumulationFusion, OffAlsoAddsOneForTheLogitsWeightGradient) {
  LayerShape unfused = small();
  unfused.gradient_accumulation_fusion = false;
  const auto hb = kernels(head_backward(unfused));
  ASSERT_EQ(count(hb, ir::ROLE_GRAD_ACCUM), 1);
  for (const Kernel& k : hb) {
    if (k.role != ir::ROLE_GRAD_ACCUM) continue;
    EXPECT_DOUBLE_EQ(k.bytes, (2 + 4 + 4) * kH * 500);  // h × ⌈1000 / 2⌉ weights, fp32 main_grad
  }
  // The embedding's scatter-add writes its fp32 gradient itself.
  EXPECT_EQ(count(kernels(embedding_backward(unfused)), ir::ROLE_GRAD_ACCUM), 0);
}

// ---------------------------------------------------------------- from the scenario

scenario::Scenario scenario_of(const scenario::Execution& x, bool sp = true, int64_t tp = 2) {
  scenario::Scenario spec;
  auto* llm = spec.mutable_model()->mutable_llm();
  llm->set_num_layers(4);
  llm->set_hidden_size(256);
  llm->set_num_attention_heads(8);
  llm->set_num_kv_heads(8);
  llm->set_ffn_hidden_size(1024);
  llm->set_vocab_size(1000);
  llm->set_seq_length(128);
  llm->set_activation(scenario::GELU);
  llm->set_norm(scenario::LAYERNORM);
  auto* par = spec.mutable_parallel();
  par->set_tp(tp);
  par->set_sequence_parallel(sp);
  par->set_cp(1);
  par->set_pp(1);
  par->set_dp(1);
  spec.mutable_training()->set_micro_batch(2);
  spec.mutable_training()->set_precision(scenario::BF16);
  spec.mutable_schedule()->set_kind(scenario::ONE_F_ONE_B);
  *spec.mutable_execution() = x;
  return spec;
}

TEST(ApplyExecution, TheShapeTakesTheResolvedSwitches) {
  // Megatron-core 0.12's defaults: everything fused, fp32 gradients, no TP overlap.
  LayerShape s = layer_shape(scenario_of({}));
  EXPECT_TRUE(s.gradient_accumulation_fusion && s.grad_fp32 && s.bias_gelu_fusion && s.bias_dropout_fusion &&
              s.masked_softmax_fusion && s.fused_layer_norm && s.tp_async_grad_reduce);
  EXPECT_EQ(s.tp_overlap_ag_chunks, 1);
  EXPECT_EQ(s.tp_overlap_rs_chunks, 1);

  scenario::Execution off;
  off.set_gradient_accumulation_fusion(false);
  off.set_grad_reduce_in_fp32(false);
  off.set_bias_gelu_fusion(false);
  off.set_bias_dropout_fusion(false);
  off.set_masked_softmax_fusion(false);
  off.set_fused_layer_norm(false);
  off.set_tp_async_grad_reduce(false);
  s = layer_shape(scenario_of(off));
  EXPECT_FALSE(s.gradient_accumulation_fusion || s.grad_fp32 || s.bias_gelu_fusion || s.bias_dropout_fusion ||
               s.masked_softmax_fusion || s.fused_layer_norm || s.tp_async_grad_reduce);

  // Megatron-LM v2.5: no gradient-accumulation fusion.
  scenario::Execution v25;
  v25.set_software("megatron-lm-v2.5");
  EXPECT_FALSE(layer_shape(scenario_of(v25)).gradient_accumulation_fusion);
  EXPECT_FALSE(layer_shape(scenario_of(v25)).tp_async_grad_reduce);
}

TEST(ApplyExecution, TpOverlapSplitsOnlyWithSequenceParallelism) {
  scenario::Execution x;
  x.set_tp_comm_overlap(true);
  // Transformer Engine's defaults: tp pieces for the all-gather GEMMs, 4 for
  // the reduce-scatter GEMMs.
  LayerShape s = layer_shape(scenario_of(x, true, 2));
  EXPECT_EQ(s.tp_overlap_ag_chunks, 2);
  EXPECT_EQ(s.tp_overlap_rs_chunks, 4);
  x.set_tp_comm_overlap_chunks(8);
  s = layer_shape(scenario_of(x, true, 2));
  EXPECT_EQ(s.tp_overlap_ag_chunks, 8);
  EXPECT_EQ(s.tp_overlap_rs_chunks, 8);
  s = layer_shape(scenario_of(x, false, 2));
  EXPECT_EQ(s.tp_overlap_ag_chunks, 1);
  EXPECT_EQ(s.tp_overlap_rs_chunks, 1);
}

// ---------------------------------------------------------------- sliding window

TEST(SlidingWindow, AttentionFlopsFollowTheBand) {
  const int64_t b = 2, a = 4, s = 1024, d = 64;
  const double causal = 4.0 * b * a * d * s * s / 2;  // 4·b·s²·a·d, halved
  // No window, or one at least the sequence: the causal count, no window entry.
  for (int64_t w : {int64_t{0}, s, 2 * s}) {
    const Kernel k = attention_forward(ir::FORWARD, b, a, a, s, s, d, true, w);
    EXPECT_DOUBLE_EQ(k.flops, causal) << w;
    EXPECT_EQ(k.shape.size(), 7u) << w;
  }
  // w < s: 4·b·a·d·(s·w − w²/2); the window is the shape's 8th entry.
  for (int64_t w : {int64_t{1}, int64_t{256}, s - 1}) {
    const double wd = static_cast<double>(w), sd = static_cast<double>(s);
    const Kernel k = attention_forward(ir::FORWARD, b, a, a, s, s, d, true, w);
    EXPECT_DOUBLE_EQ(k.flops, 4.0 * b * a * d * (sd * wd - wd * wd / 2)) << w;
    EXPECT_LT(k.flops, causal) << w;
    ASSERT_EQ(k.shape.size(), 8u);
    EXPECT_EQ(k.shape[7], w);
    // FA2's backward: 2.5 × the forward.
    EXPECT_DOUBLE_EQ(attention_backward(b, a, a, s, s, d, true, w).flops, 2.5 * k.flops) << w;
    EXPECT_DOUBLE_EQ(attention_score_pairs(s, s, true, w), sd * wd - wd * wd / 2);
  }
  // At w = s the band formula meets the causal one.
  EXPECT_DOUBLE_EQ(4.0 * b * a * d * (1.0 * s * s - 1.0 * s * s / 2), causal);
}

TEST(SlidingWindow, LayerAttentionKernelUsesTheRanksHeads) {
  LayerShape s = small();
  s.attention_window = 32;
  double attention = 0, backward = 0;
  for (const Kernel& k : fwd(s))
    if (k.op_class == ir::ATTENTION) attention += k.flops;
  for (const Kernel& k : bwd(s))
    if (k.op_class == ir::ATTENTION) backward += k.flops;
  // b = 2, a_r = 8 / 2, d = 32, s = 128, w = 32.
  EXPECT_DOUBLE_EQ(attention, 4.0 * 2 * 4 * 32 * (128.0 * 32 - 32.0 * 32 / 2));
  EXPECT_DOUBLE_EQ(backward, 2.5 * attention);
}

TEST(SlidingWindow, ModelFlopsCountTheBandInFull) {
  // GPT (MHA, GELU, ffn 4h), unsharded: per layer forward 24·b·s·h² +
  // 4·b·s·min(s, w)·h; iteration 3·B·(l·that + 2·s·h·V) at b = 1.
  LayerShape s = small(false);
  s.tp = 1;
  s.micro_batch = 1;
  const double sd = 128, h = kH, v = 1000, layers = 4, batch = 16;
  for (int64_t w : {int64_t{0}, int64_t{32}, int64_t{127}, int64_t{128}, int64_t{4096}}) {
    SCOPED_TRACE(w);
    s.attention_window = w;
    const double span = w > 0 && w < 128 ? static_cast<double>(w) : sd;
    const double layer = 24 * sd * h * h + 4 * sd * span * h;
    EXPECT_DOUBLE_EQ(layer_model_flops_forward(s), layer);
    EXPECT_DOUBLE_EQ(model_flops_per_iteration(s, 4, 16), 3 * batch * (layers * layer + 2 * sd * h * v));
    // Selective recompute repeats the attention core in the same convention.
    EXPECT_DOUBLE_EQ(hardware_flops_per_iteration(s, 4, 16, scenario::RECOMPUTE_SELECTIVE) -
                         model_flops_per_iteration(s, 4, 16),
                     batch * layers * 4 * sd * span * h);
    // Per-rank model FLOPs do not depend on the plan: TP 2 keeps the totals.
    LayerShape sharded = s;
    sharded.tp = 2;
    EXPECT_DOUBLE_EQ(model_flops_per_iteration(sharded, 4, 16), model_flops_per_iteration(s, 4, 16));
  }
}

// ---------------------------------------------------------------- optimizer step

TEST(OptimizerKernels, BytesPerParameterAreAsDocumented) {
  const int64_t n = 123'457;
  const double nd = static_cast<double>(n);
  struct Want {
    Kernel k;
    ir::OpClass op_class;
    ir::KernelRole role;
    ir::Phase phase;
    std::vector<int64_t> shape;
    double bytes_per_param;
  };
  const Want wants[] = {
      // Adam: read fp32 grad, master, m, v (16 B), write master, m, v (12 B).
      {adam_step(n), ir::OPTIMIZER, ir::ROLE_OPTIMIZER_STEP, ir::OPTIMIZER_STEP, {n}, 16 + 12},
      // The norm reads each fp32 gradient; the clip reads and writes it.
      {grad_norm(n), ir::OPTIMIZER, ir::ROLE_GRAD_NORM, ir::OPTIMIZER_STEP, {n, 4}, 4},
      {grad_clip(n), ir::OPTIMIZER, ir::ROLE_GRAD_CLIP, ir::OPTIMIZER_STEP, {n, 8}, 4 + 4},
      // fp32 master read, bf16 weight written.
      {param_copy(n), ir::ELEMENTWISE, ir::ROLE_PARAM_COPY, ir::OPTIMIZER_STEP, {n, 6}, 4 + 2},
      // The main_grad memset at the iteration start: fp32, or 16-bit.
      {grad_zero(n), ir::ELEMENTWISE, ir::ROLE_GRAD_ZERO, ir::DP_SYNC, {n, 4}, 4},
      {grad_zero(n, 2), ir::ELEMENTWISE, ir::ROLE_GRAD_ZERO, ir::DP_SYNC, {n, 2}, 2},
      // fp16: gradients to fp32 (read 2, write 4), the unscale (read + write fp32).
      {grad_to_fp32(n), ir::ELEMENTWISE, ir::ROLE_GRAD_TO_FP32, ir::OPTIMIZER_STEP, {n, 6}, 2 + 4},
      {grad_unscale(n), ir::OPTIMIZER, ir::ROLE_GRAD_UNSCALE, ir::OPTIMIZER_STEP, {n, 8}, 4 + 4},
  };
  for (const Want& w : wants) {
    SCOPED_TRACE(ir::KernelRole_Name(w.role));
    EXPECT_EQ(w.k.op_class, w.op_class);
    EXPECT_EQ(w.k.role, w.role);
    EXPECT_EQ(w.k.phase, w.phase);
    EXPECT_EQ(w.k.shape, w.shape);
    EXPECT_DOUBLE_EQ(w.k.bytes, w.bytes_per_param * nd);
    EXPECT_EQ(w.k.flops, 0);
  }
  EXPECT_EQ(kAdamBytesPerParameter, 28);
}

TEST(OptimizerKernels, UpdateIsNormClipAdamCopy) {
  const int64_t n = 1000;
  const auto ks = optimizer_update(n);
  ASSERT_EQ(ks.size(), 4u);
  EXPECT_EQ(ks[0].role, ir::ROLE_GRAD_NORM);
  EXPECT_EQ(ks[1].role, ir::ROLE_GRAD_CLIP);
  EXPECT_EQ(ks[2].role, ir::ROLE_OPTIMIZER_STEP);
  EXPECT_EQ(ks[3].role, ir::ROLE_PARAM_COPY);
  EXPECT_DOUBLE_EQ(bytes(ks), (4 + 8 + 28 + 6) * 1000.0);
}

}  // namespace
}  // namespace lacuna::model
