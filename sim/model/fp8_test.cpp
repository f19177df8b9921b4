// The FP8 pass (docs/fp8.md): which GEMMs run FP8, the casts with their exact
// bytes per recipe, current scaling's amax work, FP8 gathers under SP, and
// every switch off giving exactly the BF16 layer.
#include "sim/model/fp8.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "sim/model/kernels.h"
#include "sim/model/layer.h"
#include "sim/model/layer_shape.h"

namespace lacuna::model {
namespace {

// b = 2, s = 128, h = 256, 8 heads of 32 (MHA: qkv 768 / tp), ffn 1024 GELU.
LayerShape shape(int64_t tp, bool sp) {
  LayerShape s;
  s.micro_batch = 2;
  s.seq_length = 128;
  s.hidden = 256;
  s.heads = 8;
  s.kv_heads = 8;
  s.ffn_hidden = 1024;
  s.vocab = 1000;
  s.tp = tp;
  s.sequence_parallel = sp && tp > 1;
  return s;
}

Fp8Plan plan(scenario::Fp8Recipe r, bool on = true) {
  Fp8Plan p;
  p.recipe = r;
  p.fprop = p.dgrad = p.wgrad = p.activation_storage = on;
  return p;
}

std::vector<Kernel> kernels(const std::vector<Step>& steps) {
  std::vector<Kernel> out;
  for (const Step& st : steps)
    if (const auto* k = std::get_if<Kernel>(&st)) out.push_back(*k);
  return out;
}
std::vector<CommPoint> comms(const std::vector<Step>& steps) {
  std::vector<CommPoint> out;
  for (const Step& st : steps)
    if (const auto* c = std::get_if<CommPoint>(&st)) out.push_back(*c);
  return out;
}
std::vector<Kernel> with_role(const std::vector<Kernel>& ks, ir::KernelRole role) {
  std::vector<Kernel> out;
  std::copy_if(ks.begin(), ks.end(), std::back_inserter(out), [&](const Kernel& k) { return k.role == role; });
  return out;
}
double bytes(const std::vector<Kernel>& ks) {
  double sum = 0;
  for (const Kernel& k : ks) sum += k.bytes;
  return sum;
}

// The four linear layers as (in, out) on one rank of `s`.
struct Linear {
  int64_t in, out;
};
std::vector<Linear> linears(const LayerShape& s) {
  return {{s.hidden, s.qkv_width()}, {s.q_width(), s.hidden}, {s.hidden, s.fc1_width()}, {s.ffn_per_rank(), s.hidden}};
}

void expect_same(const std::vector<Step>& a, const std::vector<Step>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].index(), b[i].index()) << i;
    if (const auto* k = std::get_if<Kernel>(&a[i])) {
      const auto& l = std::get<Kernel>(b[i]);
      EXPECT_EQ(k->op_class, l.op_class);
      EXPECT_EQ(k->role, l.role);
      EXPECT_EQ(k->phase, l.phase);
      EXPECT_EQ(k->shape, l.shape);
      EXPECT_EQ(k->flops, l.flops);
      EXPECT_EQ(k->bytes, l.bytes);
      EXPECT_EQ(k->precision, l.precision);
    } else {
      const auto& c = std::get<CommPoint>(a[i]);
      const auto& d = std::get<CommPoint>(b[i]);
      EXPECT_EQ(c.kind, d.kind);
      EXPECT_EQ(c.bytes, d.bytes);
      EXPECT_EQ(c.phase, d.phase);
    }
  }
}

TEST(Fp8, EverySwitchOffIsTheBf16Layer) {
  for (const bool sp : {false, true}) {
    for (const auto recompute : {scenario::RECOMPUTE_NONE, scenario::RECOMPUTE_SELECTIVE, scenario::RECOMPUTE_FULL}) {
      const LayerShape bf16 = shape(2, sp);
      for (const auto r : {scenario::FP8_DELAYED, scenario::FP8_CURRENT, scenario::FP8_BLOCKWISE, scenario::FP8_MXFP8}) {
        LayerShape off = bf16;
        off.fp8 = plan(r, false);
        off.fp8.param_gather = false;
        expect_same(layer_forward(off), layer_forward(bf16));
        expect_same(layer_backward(off, recompute), layer_backward(bf16, recompute));
      }
    }
  }
}

TEST(Fp8, LinearGemmsRunFp8WithOneByteOperandsOthersStayBf16) {
  LayerShape s = shape(1, false);
  s.fp8 = plan(scenario::FP8_DELAYED);
  for (const auto& steps : {layer_forward(s), layer_backward(s, scenario::RECOMPUTE_NONE)}) {
    for (const Kernel& k : kernels(steps)) {
      if (k.op_class == ir::GEMM) {
        EXPECT_EQ(k.precision, scenario::FP8) << ir::KernelRole_Name(k.role);
        const double m = static_cast<double>(k.shape[0]), n = static_cast<double>(k.shape[1]),
                     kk = static_cast<double>(k.shape[2]);
        EXPECT_EQ(k.bytes, m * kk + kk * n + 2 * m * n);
        EXPECT_EQ(k.flops, 2 * m * n * kk);
      } else {
        // Attention, norms, activation, residuals: BF16 (the program's).
        EXPECT_EQ(k.precision, scenario::PRECISION_UNSPECIFIED) << ir::KernelRole_Name(k.role);
      }
    }
  }
}

// Closed form of one layer's casts: forward each linear's input X [t, in],
// backward each output gradient dY [t, out]; 2 B read + 1 B per copy written
// per element, plus the copies' scales.
double cast_bytes(const LayerShape& s, scenario::Fp8Recipe r, int copies) {
  const int64_t t = s.tokens();
  double sum = 0;
  for (const Linear& l : linears(s))
    for (const int64_t e : {t * l.in, t * l.out})
      sum += static_cast<double>(e) * (2 + copies) + copies * fp8_scale_bytes(r, e);
  return sum;
}

TEST(Fp8, CastBytesPerRecipeMatchTheClosedForm) {
  struct Case {
    scenario::Fp8Recipe recipe;
    bool blackwell;
    int copies;  // rowwise + transposed / columnwise, or one serving both
  };
  for (const Case c : {Case{scenario::FP8_DELAYED, false, 2}, Case{scenario::FP8_CURRENT, false, 2},
                       Case{scenario::FP8_BLOCKWISE, false, 2}, Case{scenario::FP8_DELAYED, true, 1},
                       Case{scenario::FP8_CURRENT, true, 1}, Case{scenario::FP8_BLOCKWISE, true, 2},
                       Case{scenario::FP8_MXFP8, true, 2}}) {
    LayerShape s = shape(1, false);
    s.fp8 = plan(c.recipe);
    s.fp8.non_tn_gemm = c.blackwell;
    const auto casts = with_role(kernels(layer_forward(s)), ir::ROLE_FP8_CAST);
    const auto bcasts = with_role(kernels(layer_backward(s, scenario::RECOMPUTE_NONE)), ir::ROLE_FP8_CAST);
    EXPECT_EQ(casts.size(), 4u);
    EXPECT_EQ(bcasts.size(), 4u);
    EXPECT_DOUBLE_EQ(bytes(casts) + bytes(bcasts), cast_bytes(s, c.recipe, c.copies))
        << scenario::Fp8Recipe_Name(c.recipe) << (c.blackwell ? " blackwell" : " hopper");
    for (const Kernel& k : casts) EXPECT_EQ(k.op_class, ir::ELEMENTWISE);
  }
  // Scales: per tensor 4 B, blockwise 4 B per 128, MXFP8 1 B per 32.
  EXPECT_EQ(fp8_scale_bytes(scenario::FP8_DELAYED, 1 << 20), 4);
  EXPECT_EQ(fp8_scale_bytes(scenario::FP8_BLOCKWISE, 1 << 20), (1 << 20) / 128 * 4);
  EXPECT_EQ(fp8_scale_bytes(scenario::FP8_MXFP8, 1 << 20), (1 << 20) / 32);
}

TEST(Fp8, OnlyDelayedAndBlockScaledRecipesRunNoAmaxKernels) {
  for (const auto r : {scenario::FP8_DELAYED, scenario::FP8_BLOCKWISE, scenario::FP8_MXFP8}) {
    LayerShape s = shape(2, true);
    s.fp8 = plan(r);
    s.fp8.non_tn_gemm = true;
    EXPECT_TRUE(with_role(kernels(layer_forward(s)), ir::ROLE_FP8_AMAX).empty());
    for (const CommPoint& c : comms(layer_forward(s))) EXPECT_NE(c.kind, ir::ALL_REDUCE);
  }
}

TEST(Fp8, CurrentScalingReducesSequenceParallelAmaxesOverTp) {
  LayerShape s = shape(2, true);
  s.fp8 = plan(scenario::FP8_CURRENT);
  const auto f = layer_forward(s);
  const auto b = layer_backward(s, scenario::RECOMPUTE_NONE);
  // One amax pass per cast, reading the bf16 tensor.
  const auto fc = with_role(kernels(f), ir::ROLE_FP8_CAST), fa = with_role(kernels(f), ir::ROLE_FP8_AMAX);
  ASSERT_EQ(fa.size(), fc.size());
  for (size_t i = 0; i < fa.size(); ++i) EXPECT_EQ(fa[i].bytes, 2.0 * static_cast<double>(fc[i].shape[0]));
  EXPECT_EQ(with_role(kernels(b), ir::ROLE_FP8_AMAX).size(), with_role(kernels(b), ir::ROLE_FP8_CAST).size());
  // The SP-gathered inputs (QKV, FC1 forward; projection and FC2 output
  // gradients backward): one fp32 all-reduce each, before the cast.
  auto amax_reductions = [](const std::vector<Step>& st) {
    int n = 0;
    for (const CommPoint& c : comms(st))
      if (c.kind == ir::ALL_REDUCE && c.bytes == 4) {
        ++n;
        EXPECT_EQ(c.consumer.role, ir::ROLE_FP8_CAST);
      }
    return n;
  };
  EXPECT_EQ(amax_reductions(f), 2);
  EXPECT_EQ(amax_reductions(b), 2);
}

TEST(Fp8, SequenceParallelCastsTheShardAndGathersFp8) {
  const LayerShape bf16 = shape(2, true);
  LayerShape s = bf16;
  s.fp8 = plan(scenario::FP8_DELAYED);
  const auto f = layer_forward(s);
  // QKV's input: the t/tp-token shard is cast, before the gather.
  const auto casts = with_role(kernels(f), ir::ROLE_FP8_CAST);
  EXPECT_EQ(casts.front().shape[0], s.sp_tokens() * s.hidden);
  size_t cast_at = 0, gather_at = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    const auto* k = std::get_if<Kernel>(&f[i]);
    const auto* c = std::get_if<CommPoint>(&f[i]);
    if (k != nullptr && k->role == ir::ROLE_FP8_CAST && cast_at == 0) cast_at = i;
    if (c != nullptr && c->kind == ir::ALL_GATHER && gather_at == 0) gather_at = i;
  }
  EXPECT_LT(cast_at, gather_at);
  // Every TP all-gather moves 1 byte per element (forward and backward).
  auto gathers = [](const std::vector<Step>& st) {
    std::vector<int64_t> out;
    for (const CommPoint& c : comms(st))
      if (c.kind == ir::ALL_GATHER) out.push_back(c.bytes);
    return out;
  };
  const auto g8 = gathers(f), g16 = gathers(layer_forward(bf16));
  ASSERT_EQ(g8.size(), g16.size());
  for (size_t i = 0; i < g8.size(); ++i) EXPECT_EQ(2 * g8[i], g16[i]);
  const auto b8 = gathers(layer_backward(s, scenario::RECOMPUTE_NONE));
  const auto b16 = gathers(layer_backward(bf16, scenario::RECOMPUTE_NONE));
  ASSERT_EQ(b8.size(), b16.size());
  for (size_t i = 0; i < b8.size(); ++i) EXPECT_EQ(2 * b8[i], b16[i]);
  // Reduce-scatters carry bf16 outputs.
  for (const CommPoint& c : comms(f))
    if (c.kind == ir::REDUCE_SCATTER) {
      EXPECT_EQ(c.bytes, s.hidden_bytes());
    }
}

TEST(Fp8, FullRecomputeCastsTheReplayedForwardOnce) {
  LayerShape s = shape(1, false);
  s.fp8 = plan(scenario::FP8_DELAYED);
  const auto ks = kernels(layer_backward(s, scenario::RECOMPUTE_FULL));
  int replay = 0, backward = 0;
  for (const Kernel& k : with_role(ks, ir::ROLE_FP8_CAST)) (k.phase == ir::RECOMPUTE ? replay : backward)++;
  EXPECT_EQ(replay, 4);
  EXPECT_EQ(backward, 4);
}

TEST(Fp8, SplitGemmsCastOnceForAllPieces) {
  LayerShape s = shape(2, true);
  s.tp_overlap_ag_chunks = 2;
  s.tp_overlap_rs_chunks = 4;
  s.fp8 = plan(scenario::FP8_DELAYED);
  const auto casts = with_role(kernels(layer_forward(s)), ir::ROLE_FP8_CAST);
  ASSERT_EQ(casts.size(), 4u);
  EXPECT_EQ(casts[0].shape[0], s.sp_tokens() * s.hidden);            // QKV: shard before the gathers
  EXPECT_EQ(casts[1].shape[0], s.tokens() * s.q_width());           // projection: all 4 pieces
  EXPECT_EQ(casts[3].shape[0], s.tokens() * s.ffn_per_rank());      // FC2
}

TEST(Fp8, WgradOffKeepsOneCopyAndBf16WeightGradients) {
  LayerShape s = shape(1, false);
  s.fp8 = plan(scenario::FP8_DELAYED);
  s.fp8.wgrad = false;
  s.fp8.activation_storage = false;
  const auto b = kernels(layer_backward(s, scenario::RECOMPUTE_NONE));
  for (const Kernel& k : b)
    if (k.op_class == ir::GEMM) {
      EXPECT_EQ(k.precision, k.phase == ir::BACKWARD_WEIGHT ? scenario::PRECISION_UNSPECIFIED : scenario::FP8);
    }
  for (const Kernel& k : with_role(b, ir::ROLE_FP8_CAST)) EXPECT_EQ(k.shape[1], 3);  // read 2, one copy
}

TEST(Fp8, AttentionSwitchTagsTheAttentionKernels) {
  LayerShape s = shape(1, false);
  s.fp8 = plan(scenario::FP8_DELAYED);
  s.fp8.attention = true;
  for (const Kernel& k : kernels(layer_backward(s, scenario::RECOMPUTE_SELECTIVE)))
    if (k.op_class == ir::ATTENTION) {
      EXPECT_EQ(k.precision, scenario::FP8);
    }
  s.fp8.attention = false;
  for (const Kernel& k : kernels(layer_forward(s)))
    if (k.op_class == ir::ATTENTION) {
      EXPECT_EQ(k.precision, scenario::PRECISION_UNSPECIFIED);
    }
}

TEST(Fp8, HeadAndEmbeddingStayBf16) {
  LayerShape s = shape(2, true);
  s.fp8 = plan(scenario::FP8_DELAYED);
  for (const auto& st : {head_forward(s), head_backward(s), embedding_forward(s), embedding_backward(s)})
    for (const Kernel& k : kernels(st)) {
      EXPECT_EQ(k.precision, scenario::PRECISION_UNSPECIFIED);
      EXPECT_NE(k.role, ir::ROLE_FP8_CAST);
    }
}

TEST(Fp8, ResolvedDefaultsAreMegatronAndTransformerEngines) {
  scenario::Scenario spec;
  spec.mutable_training()->set_precision(scenario::FP8);
  const scenario::Fp8 f = resolve_fp8(spec);
  EXPECT_EQ(f.recipe(), scenario::FP8_DELAYED);
  EXPECT_TRUE(f.fprop() && f.dgrad() && f.wgrad() && f.activation_storage());
  EXPECT_FALSE(f.attention() || f.param_gather());
  EXPECT_EQ(f.amax_history_len(), 1);
  spec.mutable_training()->mutable_fp8()->set_recipe(scenario::FP8_MXFP8);
  spec.mutable_training()->mutable_fp8()->set_wgrad(false);
  const scenario::Fp8 g = resolve_fp8(spec);
  EXPECT_EQ(g.amax_history_len(), 0);
  EXPECT_FALSE(g.activation_storage());
  // Not an FP8 program: no plan.
  spec.mutable_training()->set_precision(scenario::BF16);
  EXPECT_FALSE(fp8_plan(spec).any());
  spec.mutable_training()->set_precision(scenario::FP8);
  spec.mutable_cluster()->mutable_gpu()->set_mx_formats(true);
  EXPECT_TRUE(fp8_plan(spec).non_tn_gemm);
}

}  // namespace
}  // namespace lacuna::model

namespace lacuna::model {
namespace {

TEST(Fp8, LayerWeightsAreTheLinearLayersInTimesOut) {
  LayerShape s;
  s.micro_batch = 1;
  s.seq_length = 64;
  s.hidden = 256;
  s.heads = 8;
  s.kv_heads = 2;
  s.ffn_hidden = 1024;
  s.activation = scenario::SWIGLU;
  s.tp = 2;
  s.sequence_parallel = true;
  s.tp_overlap_ag_chunks = 2;  // split GEMMs count once
  s.tp_overlap_rs_chunks = 4;
  EXPECT_EQ(fp8_layer_weights(s).total(), 0);  // not FP8
  s.fp8.recipe = scenario::FP8_DELAYED;
  s.fp8.fprop = s.fp8.dgrad = s.fp8.wgrad = true;
  const int64_t h = 256, qkv = (8 / 2 + 2 * 2 / 2) * 32, q = 8 / 2 * 32, f = 1024 / 2;
  const Fp8Weights w = fp8_layer_weights(s);
  EXPECT_EQ(w.dense, h * qkv + q * h + h * 2 * f + f * h);
  EXPECT_EQ(w.expert, 0);
  const Fp8Weights three = fp8_layers_weights(s, 5, 3);
  EXPECT_EQ(three.dense, 3 * w.dense);
}

// Delayed scaling's reduction carries 3 amaxes per FP8 GEMM forward and 2
// backward (TE module/base.py); a MoE layer's grouped GEMM counts one GEMM
// per local expert (TE GroupedLinear num_gemms).
TEST(Fp8, DelayedAmaxValuesCountEveryFp8Gemm) {
  LayerShape s = shape(2, true);
  s.tp_overlap_ag_chunks = 2;  // a split GEMM is one module
  EXPECT_EQ(fp8_layer_gemms(s), 0);  // not FP8
  s.fp8 = plan(scenario::FP8_DELAYED);
  EXPECT_EQ(fp8_layer_gemms(s), 4);  // QKV, projection, FC1, FC2
  EXPECT_TRUE(fp8_delayed_amax_reduction(s.fp8));
  EXPECT_FALSE(fp8_delayed_amax_reduction(plan(scenario::FP8_CURRENT)));
  EXPECT_FALSE(fp8_delayed_amax_reduction(plan(scenario::FP8_DELAYED, false)));
  EXPECT_EQ(fp8_delayed_amax_values(4, true), 12);
  EXPECT_EQ(fp8_delayed_amax_values(4, false), 8);
  s.moe.num_experts = 8;
  s.moe.top_k = 2;
  s.moe.expert_ffn = 512;
  s.moe.ep = 2;
  s.moe.ep_per_domain = 2;
  s.moe.dispatcher = scenario::DISPATCHER_ALLTOALL;
  s.moe_layer = true;
  for (const bool grouped : {true, false}) {
    s.moe.grouped_gemm = grouped;
    EXPECT_EQ(fp8_layer_gemms(s), 2 + 2 * 4) << grouped;  // QKV, projection, FC1 and FC2 of 4 local experts
  }
  s.moe.shared_ffn = 1024;
  EXPECT_EQ(fp8_layer_gemms(s), 2 + 2 * 4 + 2);
  // The update reads the amax, reads and writes history and scale (fp32).
  const Kernel u = fp8_amax_update(ir::FORWARD, 12, 1);
  EXPECT_EQ(u.role, ir::ROLE_FP8_AMAX);
  EXPECT_DOUBLE_EQ(u.bytes, 12.0 * (1 + 2 + 2) * kFp32);
  EXPECT_DOUBLE_EQ(fp8_amax_update(ir::FORWARD, 12, 16).bytes, 12.0 * (1 + 32 + 2) * kFp32);
}

TEST(Fp8, WeightCastsOncePerStep) {
  Fp8Plan p;
  p.recipe = scenario::FP8_DELAYED;
  p.fprop = p.dgrad = p.wgrad = true;
  // Hopper, no param gather: bf16 → rowwise + transposed, read 2 write 2.
  auto k = fp8_weight_casts(p, 1000, 1000);
  ASSERT_EQ(k.size(), 1u);
  EXPECT_EQ(k[0].bytes, 1000.0 * 4 + 2 * 4);
  EXPECT_EQ(k[0].phase, ir::OPTIMIZER_STEP);
  // Param gather: the fp32 master shard to FP8 (read 4, write 1) and the
  // gathered weights' transpose (read 1, write 1).
  p.param_gather = true;
  k = fp8_weight_casts(p, 1000, 125);
  ASSERT_EQ(k.size(), 2u);
  EXPECT_EQ(k[0].bytes, 125.0 * 5 + 4);
  EXPECT_EQ(k[1].bytes, 1000.0 * 2 + 4);
  // Blackwell per-tensor: one copy serves both GEMMs, no transpose.
  p.non_tn_gemm = true;
  EXPECT_EQ(fp8_weight_casts(p, 1000, 125).size(), 1u);
  // Nothing in FP8: no casts.
  p.fprop = p.dgrad = p.wgrad = false;
  EXPECT_TRUE(fp8_weight_casts(p, 1000, 125).empty());
}

}  // namespace
}  // namespace lacuna::model
