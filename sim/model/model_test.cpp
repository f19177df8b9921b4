#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "sim/model/accounting.h"
#include "sim/model/kernels.h"
#include "sim/model/layer.h"

namespace lacuna::model {
namespace {

LayerShape gpt3(int64_t b = 1) {
  LayerShape s;
  s.micro_batch = b;
  s.seq_length = 2048;
  s.hidden = 12288;
  s.heads = 96;
  s.kv_heads = 96;
  s.ffn_hidden = 4 * 12288;
  s.vocab = 51200;
  s.activation = scenario::GELU;
  s.norm = scenario::LAYERNORM;
  s.linear_bias = true;
  s.learned_positions = true;
  return s;
}

LayerShape llama2_70b() {
  LayerShape s;
  s.seq_length = 4096;
  s.hidden = 8192;
  s.heads = 64;
  s.kv_heads = 8;
  s.ffn_hidden = 28672;
  s.vocab = 32000;
  s.activation = scenario::SWIGLU;
  s.norm = scenario::RMSNORM;
  s.untied_output = true;  // Llama-2: rotary positions, untied output layer
  return s;
}

struct Sums {
  double gemm = 0, attention = 0, gemm_b = 0, gemm_w = 0, recompute = 0;
  int kernels = 0;
  std::map<ir::CollectiveKind, int> tp, cp;
  int64_t tp_bytes = 0;
};

Sums sum(const std::vector<Step>& steps) {
  Sums out;
  for (const Step& st : steps) {
    if (const auto* k = std::get_if<Kernel>(&st)) {
      ++out.kernels;
      if (k->phase == ir::RECOMPUTE) out.recompute += k->flops;
      if (k->op_class == ir::GEMM) {
        out.gemm += k->flops;
        if (k->phase == ir::BACKWARD_INPUT) out.gemm_b += k->flops;
        if (k->phase == ir::BACKWARD_WEIGHT) out.gemm_w += k->flops;
      }
      if (k->op_class == ir::ATTENTION) out.attention += k->flops;
      if (!k->is_matmul()) {
        EXPECT_EQ(k->flops, 0) << "memory-bound kernels carry bytes only";
      }
      EXPECT_GT(k->bytes, 0);
    } else {
      const auto& c = std::get<CommPoint>(st);
      (c.group == CommGroup::kTp ? out.tp : out.cp)[c.kind]++;
      if (c.group == CommGroup::kTp) out.tp_bytes += c.bytes;
    }
  }
  return out;
}

TEST(LayerFlops, ForwardMatchesMegatronWithFullAttention) {
  for (int64_t b : {1, 2}) {
    LayerShape s = gpt3(b);
    s.causal = false;  // Megatron's 4·b·s²·h counts the whole score matrix
    const double bd = static_cast<double>(b), sd = 2048, h = 12288;
    const double megatron = 24 * bd * sd * h * h + 4 * bd * sd * sd * h;
    const Sums f = sum(layer_forward(s));
    EXPECT_DOUBLE_EQ(f.gemm + f.attention, megatron);
    EXPECT_DOUBLE_EQ(layer_model_flops_forward(gpt3(b)), megatron);
  }
}

TEST(LayerFlops, CausalAttentionExecutesHalfTheScores) {
  const LayerShape s = gpt3(2);
  const double sd = 2048, h = 12288;
  const Sums f = sum(layer_forward(s));
  EXPECT_DOUBLE_EQ(f.attention, 2 * 2 * sd * sd * h);
  EXPECT_DOUBLE_EQ(f.gemm, 24 * 2 * sd * h * h);
  // The model-FLOP convention ignores the mask.
  EXPECT_GT(layer_model_flops_forward(s), f.gemm + f.attention);
}

TEST(LayerFlops, BackwardGemmsAreTwiceForwardSplitEvenlyIntoBAndW) {
  for (bool swiglu : {false, true}) {
    LayerShape s = swiglu ? llama2_70b() : gpt3(2);
    const Sums f = sum(layer_forward(s));
    const Sums bw = sum(layer_backward(s, scenario::RECOMPUTE_NONE));
    EXPECT_DOUBLE_EQ(bw.gemm, 2 * f.gemm);
    EXPECT_DOUBLE_EQ(bw.gemm_b, f.gemm);
    EXPECT_DOUBLE_EQ(bw.gemm_w, f.gemm);
    EXPECT_DOUBLE_EQ(bw.attention, 2.5 * f.attention);  // FA2: 5 matmuls vs 2
  }
}

TEST(LayerFlops, RecomputeRepeatsTheForwardItNames) {
  const LayerShape s = gpt3(1);
  const Sums f = sum(layer_forward(s));
  const Sums none = sum(layer_backward(s, scenario::RECOMPUTE_NONE));
  const Sums sel = sum(layer_backward(s, scenario::RECOMPUTE_SELECTIVE));
  const Sums full = sum(layer_backward(s, scenario::RECOMPUTE_FULL));
  EXPECT_EQ(none.recompute, 0);
  EXPECT_DOUBLE_EQ(sel.recompute, f.attention);
  EXPECT_EQ(sel.kernels, none.kernels + 1);
  EXPECT_DOUBLE_EQ(full.recompute, f.gemm + f.attention);
  EXPECT_EQ(full.kernels, none.kernels + f.kernels);
}

TEST(LayerFlops, TensorParallelShardsSumToTheWhole) {
  for (int64_t tp : {2, 4, 8}) {
    LayerShape s = gpt3(1);
    const Sums whole = sum(layer_forward(s));
    s.tp = tp;
    const Sums shard = sum(layer_forward(s));
    EXPECT_DOUBLE_EQ(shard.gemm * static_cast<double>(tp), whole.gemm);
    EXPECT_DOUBLE_EQ(shard.attention * static_cast<double>(tp), whole.attention);
  }
}

TEST(LayerFlops, ContextParallelShardsSumToTheWhole) {
  LayerShape s = gpt3(1);
  const Sums whole = sum(layer_forward(s));
  s.cp = 4;
  const Sums shard = sum(layer_forward(s));
  EXPECT_DOUBLE_EQ(shard.gemm * 4, whole.gemm);
  EXPECT_DOUBLE_EQ(shard.attention * 4, whole.attention);
  ASSERT_EQ(shard.cp.size(), 1u);
  EXPECT_EQ(shard.cp.at(ir::ALL_GATHER), 1);
  const Sums back = sum(layer_backward(s, scenario::RECOMPUTE_NONE));
  EXPECT_EQ(back.cp.at(ir::REDUCE_SCATTER), 1);
}

TEST(LayerComm, TensorParallelCollectivesPerLayer) {
  LayerShape s = gpt3(2);
  s.tp = 8;
  const int64_t bsh2 = 2 * 2048 * 12288 * 2;
  Sums f = sum(layer_forward(s));
  Sums bw = sum(layer_backward(s, scenario::RECOMPUTE_NONE));
  EXPECT_EQ(f.tp, (std::map<ir::CollectiveKind, int>{{ir::ALL_REDUCE, 2}}));
  EXPECT_EQ(bw.tp, (std::map<ir::CollectiveKind, int>{{ir::ALL_REDUCE, 2}}));
  EXPECT_EQ(f.tp_bytes, 2 * bsh2);

  s.sequence_parallel = true;
  f = sum(layer_forward(s));
  bw = sum(layer_backward(s, scenario::RECOMPUTE_NONE));
  EXPECT_EQ(f.tp, (std::map<ir::CollectiveKind, int>{{ir::ALL_GATHER, 2}, {ir::REDUCE_SCATTER, 2}}));
  // Backward with SP: the gradients' two all-gathers, and QKV's and FC1's
  // inputs gathered again for their weight gradients (Megatron's
  // LinearWithGradAccumulationAndAsyncCommunication keeps the sequence shard).
  EXPECT_EQ(bw.tp, (std::map<ir::CollectiveKind, int>{{ir::ALL_GATHER, 4}, {ir::REDUCE_SCATTER, 2}}));
  EXPECT_EQ(f.tp_bytes, 4 * bsh2);
  Sums full = sum(layer_backward(s, scenario::RECOMPUTE_FULL));
  EXPECT_EQ(full.tp, (std::map<ir::CollectiveKind, int>{{ir::ALL_GATHER, 6}, {ir::REDUCE_SCATTER, 4}}));

  s.parallel_attention_mlp = true;
  f = sum(layer_forward(s));
  bw = sum(layer_backward(s, scenario::RECOMPUTE_NONE));
  EXPECT_EQ(f.tp, (std::map<ir::CollectiveKind, int>{{ir::ALL_GATHER, 1}, {ir::REDUCE_SCATTER, 1}}));
  // One gradient gather, one reduction, and both FC1 and QKV regather.
  EXPECT_EQ(bw.tp, (std::map<ir::CollectiveKind, int>{{ir::ALL_GATHER, 3}, {ir::REDUCE_SCATTER, 1}}));

  s.tp = 1;
  s.sequence_parallel = false;
  EXPECT_TRUE(sum(layer_forward(s)).tp.empty());
  EXPECT_TRUE(sum(layer_backward(s, scenario::RECOMPUTE_FULL)).tp.empty());
}

TEST(LayerComm, BackwardReductionOverlapsTheWeightGradient) {
  LayerShape s = gpt3(1);
  s.tp = 4;
  const auto steps = layer_backward(s, scenario::RECOMPUTE_NONE);
  // The dX all-reduce after QKV's dgrad is followed by QKV's wgrad, which does
  // not consume it: it runs while the reduction is in flight.
  for (size_t i = 0; i + 1 < steps.size(); ++i) {
    const auto* c = std::get_if<CommPoint>(&steps[i]);
    if (c == nullptr || c->kind != ir::ALL_REDUCE) continue;
    const auto& prev = std::get<Kernel>(steps[i - 1]);
    const auto& next = std::get<Kernel>(steps[i + 1]);
    EXPECT_EQ(prev.phase, ir::BACKWARD_INPUT);
    EXPECT_EQ(next.phase, ir::BACKWARD_WEIGHT);
    EXPECT_EQ(prev.role, next.role);
  }
}

TEST(Kernels, GemmAndAttentionFormulas) {
  const Kernel g = gemm(ir::ROLE_FC1, ir::FORWARD, 4096, 6144, 12288);
  EXPECT_DOUBLE_EQ(g.flops, 2.0 * 4096 * 6144 * 12288);
  EXPECT_DOUBLE_EQ(g.bytes, 2.0 * (4096.0 * 12288 + 12288.0 * 6144 + 4096.0 * 6144));
  EXPECT_EQ(g.shape, (std::vector<int64_t>{4096, 6144, 12288}));

  const Kernel a = attention_forward(ir::FORWARD, 2, 12, 4, 2048, 2048, 128, false);
  EXPECT_DOUBLE_EQ(a.flops, 4.0 * 2 * 2048 * 2048 * 12 * 128);
  const double q = 2.0 * 2048 * 12 * 128 * 2, kv = 2.0 * 2048 * 4 * 128 * 2, lse = 2.0 * 2048 * 12 * 4;
  EXPECT_DOUBLE_EQ(a.bytes, 2 * q + 2 * kv + lse);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 12, 2048, 2048, 128, 0, 4}));
  const Kernel ac = attention_forward(ir::FORWARD, 2, 12, 4, 2048, 2048, 128, true);
  EXPECT_DOUBLE_EQ(ac.flops, a.flops / 2);

  // Fused Adam: read grad, master, m, v; write master, m, v (fp32); the
  // bf16 model weights come from the separate copy (read 4, write 2).
  const Kernel opt = adam_step(1000);
  EXPECT_EQ(opt.op_class, ir::OPTIMIZER);
  EXPECT_DOUBLE_EQ(opt.bytes, 28.0 * 1000);
  EXPECT_DOUBLE_EQ(param_copy(1000).bytes, 6.0 * 1000);
}

// ---- Megatron-LM's unfused core attention and dropout (docs/kernels.md).

LayerShape unfused_gpt3(int64_t b, int64_t tp, bool dropout) {
  LayerShape s = gpt3(b);
  s.tp = tp;
  s.unfused_attention = true;
  s.hidden_dropout = dropout ? 0.1 : 0;
  s.attention_dropout = dropout ? 0.1 : 0;
  return s;
}

bool core_attention(ir::KernelRole r) {
  return r == ir::ROLE_ATTN_SCORES || r == ir::ROLE_ATTN_SOFTMAX || r == ir::ROLE_ATTN_DROPOUT ||
         r == ir::ROLE_ATTN_CONTEXT;
}

std::vector<Kernel> kernels(const std::vector<Step>& steps, ir::Phase phase, bool core) {
  std::vector<Kernel> out;
  for (const Step& st : steps)
    if (const auto* k = std::get_if<Kernel>(&st); k && k->phase == phase && core_attention(k->role) == core)
      out.push_back(*k);
  return out;
}

TEST(UnfusedAttention, BatchedGemmsComputeTheWholeScoreMatrix) {
  for (int64_t tp : {1, 8}) {
    const LayerShape s = unfused_gpt3(2, tp, true);
    const double b = 2, a = 96, sq = 2048, d = 128, t = static_cast<double>(tp);
    const auto fwd = kernels(layer_forward(s), ir::FORWARD, true);
    ASSERT_EQ(fwd.size(), 4u);
    EXPECT_EQ(fwd[0].role, ir::ROLE_ATTN_SCORES);
    EXPECT_EQ(fwd[1].role, ir::ROLE_ATTN_SOFTMAX);
    EXPECT_EQ(fwd[2].role, ir::ROLE_ATTN_DROPOUT);
    EXPECT_EQ(fwd[3].role, ir::ROLE_ATTN_CONTEXT);
    const double per_gemm = 2 * b * (a / t) * sq * sq * d;
    const double batch = b * a / t;
    EXPECT_EQ(fwd[0].op_class, ir::GEMM);
    EXPECT_DOUBLE_EQ(fwd[0].flops, per_gemm);
    EXPECT_DOUBLE_EQ(fwd[0].bytes, batch * 2 * (sq * d + d * sq + sq * sq));  // read Q, K; write S
    EXPECT_EQ(fwd[0].shape, (std::vector<int64_t>{2048, 2048, 128, 2 * 96 / tp}));
    EXPECT_DOUBLE_EQ(fwd[3].flops, per_gemm);
    EXPECT_DOUBLE_EQ(fwd[3].bytes, batch * 2 * (sq * sq + sq * d + sq * d));  // read P', V; write O
    // QKᵀ + P·V = 4·b·a·s²·d / t: twice the causal flash forward.
    const double forward = fwd[0].flops + fwd[3].flops;
    EXPECT_DOUBLE_EQ(forward, 4 * b * a * sq * sq * d / t);
    LayerShape flash = s;
    flash.unfused_attention = false;
    EXPECT_DOUBLE_EQ(forward, 2 * sum(layer_forward(flash)).attention);
    EXPECT_EQ(sum(layer_forward(s)).attention, 0) << "no fused ATTENTION kernel";

    const auto bwd = kernels(layer_backward(s, scenario::RECOMPUTE_NONE), ir::BACKWARD_INPUT, true);
    ASSERT_EQ(bwd.size(), 6u);
    double backward = 0;
    for (const auto& k : bwd) backward += k.flops;
    EXPECT_DOUBLE_EQ(backward, 2 * forward);
    EXPECT_EQ(kernels(layer_backward(s, scenario::RECOMPUTE_NONE), ir::BACKWARD_WEIGHT, true).size(), 0u);
  }
}

TEST(UnfusedAttention, SoftmaxAndDropoutBytes) {
  const LayerShape s = unfused_gpt3(2, 8, true);
  const double scores = 2.0 * (96 / 8) * 2048 * 2048;  // b·a_r·s²
  const auto fwd = kernels(layer_forward(s), ir::FORWARD, true);
  EXPECT_EQ(fwd[1].op_class, ir::SOFTMAX);
  EXPECT_EQ(fwd[1].shape, (std::vector<int64_t>{2 * 12 * 2048, 2048}));
  EXPECT_DOUBLE_EQ(fwd[1].bytes, scores * (2 + 2));      // read S, write P
  EXPECT_EQ(fwd[2].op_class, ir::ELEMENTWISE);
  EXPECT_DOUBLE_EQ(fwd[2].bytes, scores * (2 + 2 + 1));  // read P, write P' and the mask
  for (const auto& k : fwd) EXPECT_TRUE(k.op_class == ir::GEMM || k.flops == 0);

  const auto bwd = kernels(layer_backward(s, scenario::RECOMPUTE_NONE), ir::BACKWARD_INPUT, true);
  const std::vector<ir::KernelRole> order = {ir::ROLE_ATTN_CONTEXT, ir::ROLE_ATTN_CONTEXT, ir::ROLE_ATTN_DROPOUT,
                                             ir::ROLE_ATTN_SOFTMAX, ir::ROLE_ATTN_SCORES, ir::ROLE_ATTN_SCORES};
  for (size_t i = 0; i < order.size(); ++i) EXPECT_EQ(bwd[i].role, order[i]) << i;
  EXPECT_DOUBLE_EQ(bwd[2].bytes, scores * (2 + 1 + 2));  // read dP' and mask, write dP
  EXPECT_DOUBLE_EQ(bwd[3].bytes, scores * (2 + 2 + 2));  // read P, dP; write dS

  // attention_dropout = 0: no dropout kernel either way.
  LayerShape no_drop = s;
  no_drop.attention_dropout = 0;
  EXPECT_EQ(kernels(layer_forward(no_drop), ir::FORWARD, true).size(), 3u);
  EXPECT_EQ(kernels(layer_backward(no_drop, scenario::RECOMPUTE_NONE), ir::BACKWARD_INPUT, true).size(), 5u);
  // FLASH drops inside the fused kernel: the layer is the same with or without.
  LayerShape flash = s;
  flash.unfused_attention = false;
  flash.hidden_dropout = 0;
  LayerShape flash_drop = flash;
  flash_drop.attention_dropout = 0.1;
  const Sums a = sum(layer_forward(flash)), b = sum(layer_forward(flash_drop));
  EXPECT_EQ(a.kernels, b.kernels);
  EXPECT_EQ(a.attention, b.attention);
}

TEST(UnfusedAttention, SelectiveRecomputeRepeatsExactlyTheCoreAttentionForward) {
  for (bool dropout : {false, true}) {
    const LayerShape s = unfused_gpt3(1, 4, dropout);
    const auto fwd = kernels(layer_forward(s), ir::FORWARD, true);
    const auto sel = layer_backward(s, scenario::RECOMPUTE_SELECTIVE);
    const auto rec = kernels(sel, ir::RECOMPUTE, true);
    EXPECT_TRUE(kernels(sel, ir::RECOMPUTE, false).empty());
    ASSERT_EQ(rec.size(), fwd.size());
    for (size_t i = 0; i < fwd.size(); ++i) {
      EXPECT_EQ(rec[i].role, fwd[i].role);
      EXPECT_EQ(rec[i].op_class, fwd[i].op_class);
      EXPECT_EQ(rec[i].shape, fwd[i].shape);
      EXPECT_DOUBLE_EQ(rec[i].flops, fwd[i].flops);
      EXPECT_DOUBLE_EQ(rec[i].bytes, fwd[i].bytes);
    }
    const Sums none = sum(layer_backward(s, scenario::RECOMPUTE_NONE));
    EXPECT_EQ(sum(sel).kernels, none.kernels + static_cast<int>(fwd.size()));
    // The recompute comes right before the core attention's backward.
    size_t last_recompute = 0, first_core_backward = sel.size();
    for (size_t i = 0; i < sel.size(); ++i)
      if (const auto* k = std::get_if<Kernel>(&sel[i])) {
        if (k->phase == ir::RECOMPUTE) last_recompute = i;
        if (k->phase == ir::BACKWARD_INPUT && core_attention(k->role)) first_core_backward = std::min(first_core_backward, i);
      }
    EXPECT_EQ(last_recompute + 1, first_core_backward);
    // Full recompute repeats the whole layer forward.
    const Sums full = sum(layer_backward(s, scenario::RECOMPUTE_FULL));
    EXPECT_EQ(full.kernels, none.kernels + sum(layer_forward(s)).kernels);
  }
}

TEST(UnfusedAttention, LinearLayersAndCommunicationAreUnchanged) {
  LayerShape flash = gpt3(2);
  flash.tp = 8;
  flash.sequence_parallel = true;
  LayerShape s = flash;
  s.unfused_attention = true;
  const Sums f = sum(layer_forward(flash)), u = sum(layer_forward(s));
  double unfused_linear = 0;
  for (const auto& k : kernels(layer_forward(s), ir::FORWARD, false))
    if (k.op_class == ir::GEMM) unfused_linear += k.flops;
  EXPECT_DOUBLE_EQ(unfused_linear, f.gemm);
  EXPECT_EQ(u.tp, f.tp);
  EXPECT_EQ(u.tp_bytes, f.tp_bytes);
}

TEST(HiddenDropout, MaskBytesOnTheResidualAdds) {
  for (bool parallel : {false, true}) {
    LayerShape s = gpt3(2);
    s.tp = 8;
    s.sequence_parallel = true;
    s.parallel_attention_mlp = parallel;
    LayerShape drop = s;
    drop.hidden_dropout = 0.1;
    const double elements = 2.0 * 2048 / 8 * 12288;  // t_sp · h
    auto residual_bytes = [](const std::vector<Step>& steps, ir::Phase phase) {
      double bytes = 0;
      for (const Step& st : steps)
        if (const auto* k = std::get_if<Kernel>(&st); k && k->op_class == ir::RESIDUAL_ADD && k->phase == phase)
          bytes += k->bytes;
      return bytes;
    };
    // Two residual adds of one dropped branch each, or one add of two branches:
    // forward writes a 1-byte mask per branch element, backward reads dY and
    // the mask and writes the branch gradient (2 + 1 + 2 bytes).
    const double branches = 2;
    EXPECT_DOUBLE_EQ(residual_bytes(layer_forward(drop), ir::FORWARD) - residual_bytes(layer_forward(s), ir::FORWARD),
                     branches * elements * 1);
    const auto bw = layer_backward(s, scenario::RECOMPUTE_NONE), bw_drop = layer_backward(drop, scenario::RECOMPUTE_NONE);
    EXPECT_DOUBLE_EQ(residual_bytes(bw_drop, ir::BACKWARD_INPUT) - residual_bytes(bw, ir::BACKWARD_INPUT),
                     branches * elements * 5);
    EXPECT_EQ(sum(bw_drop).kernels, sum(bw).kernels) << "no extra kernels";
    // Full recompute re-runs the forward with the mask again.
    const auto full = layer_backward(drop, scenario::RECOMPUTE_FULL);
    EXPECT_DOUBLE_EQ(residual_bytes(full, ir::RECOMPUTE), residual_bytes(layer_forward(drop), ir::FORWARD));
  }
}

TEST(Kernels, BatchedGemm) {
  const Kernel g = batched_gemm(ir::ROLE_ATTN_SCORES, ir::FORWARD, 24, 2048, 2048, 128);
  EXPECT_DOUBLE_EQ(g.flops, 24 * 2.0 * 2048 * 2048 * 128);
  EXPECT_DOUBLE_EQ(g.bytes, 24 * 2.0 * (2048.0 * 128 + 128.0 * 2048 + 2048.0 * 2048));
  EXPECT_EQ(g.shape, (std::vector<int64_t>{2048, 2048, 128, 24}));
  EXPECT_EQ(batched_gemm(ir::ROLE_QKV, ir::FORWARD, 1, 2, 3, 4).shape, (std::vector<int64_t>{2, 3, 4}));
}

TEST(Parameters, Gpt3MatchesPtdPEquation2PlusFinalNorm) {
  const LayerShape s = gpt3();
  const double l = 96, h = 12288, V = 51200, sq = 2048;
  const double eq2 = 12 * l * h * h * (1 + 13 / (12 * h) + (V + sq) / (12 * l * h));
  EXPECT_DOUBLE_EQ(static_cast<double>(model_parameters(s, 96)), eq2 + 2 * h);
  EXPECT_NEAR(static_cast<double>(model_parameters(s, 96)), 174.6e9, 0.1e9);
}

TEST(Parameters, Llama2With70BMatchesTheReleasedCheckpoint) {
  // Hugging Face's count of the released checkpoint: untied output layer,
  // rotary positions (no parameters).
  LayerShape s = llama2_70b();
  EXPECT_EQ(model_parameters(s, 80), 68'976'648'192);
  // Tied, the output layer's 32000 × 8192 would be the embedding's.
  s.untied_output = false;
  EXPECT_EQ(model_parameters(s, 80), 68'976'648'192 - 32000LL * 8192);
}

TEST(Parameters, UntiedAddsTheOutputLayerLearnedAddsThePositionTable) {
  const LayerShape tied = gpt3();
  const int64_t V = 51200, h = 12288, sq = 2048;
  LayerShape untied = tied;
  untied.untied_output = true;
  EXPECT_EQ(model_parameters(untied, 96) - model_parameters(tied, 96), V * h);
  LayerShape rotary = tied;
  rotary.learned_positions = false;
  EXPECT_EQ(model_parameters(tied, 96) - model_parameters(rotary, 96), sq * h);
  EXPECT_EQ(embedding_parameters(tied) - embedding_parameters(rotary), sq * h);
  // Model FLOPs do not depend on either.
  EXPECT_DOUBLE_EQ(model_flops_per_iteration(untied, 96, 1536), model_flops_per_iteration(tied, 96, 1536));
  EXPECT_DOUBLE_EQ(model_flops_per_iteration(rotary, 96, 1536), model_flops_per_iteration(tied, 96, 1536));
}

TEST(Parameters, HeadHoldsOutputWeightsUnlessTiedOnOneStage) {
  const int64_t V = 51200, h = 12288, norm = 2 * 12288;
  LayerShape s = gpt3();
  s.tp = 8;
  // Tied, pp = 1: the embedding table is the output layer, one copy.
  EXPECT_EQ(head_parameters(s), norm);
  // Tied, pp > 1: Megatron's copy of the embedding on the last stage.
  s.pp = 8;
  EXPECT_EQ(head_parameters(s), V / 8 * h + norm);
  // Untied: the output layer's own slice, whatever pp.
  s.untied_output = true;
  EXPECT_EQ(head_parameters(s), V / 8 * h + norm);
  s.pp = 1;
  EXPECT_EQ(head_parameters(s), V / 8 * h + norm);
}

TEST(Parameters, OneStageRankHoldsTheWholeModel) {
  // pp = 1, tp = 1: embedding + layers + head on one rank is the model, tied or
  // untied, learned or rotary.
  for (const bool untied : {false, true}) {
    for (const bool learned : {false, true}) {
      LayerShape s = gpt3();
      s.untied_output = untied;
      s.learned_positions = learned;
      EXPECT_EQ(embedding_parameters(s) + 96 * layer_parameters(s) + head_parameters(s), model_parameters(s, 96))
          << "untied " << untied << " learned " << learned;
    }
  }
}

TEST(Parameters, ShapeFollowsTheScenarioFields) {
  scenario::Scenario spec;
  auto* llm = spec.mutable_model()->mutable_llm();
  llm->set_linear_bias(true);
  llm->set_position_embedding(scenario::Transformer::POSITION_ROTARY);
  spec.mutable_parallel()->set_pp(4);
  LayerShape s = layer_shape(spec);
  EXPECT_FALSE(s.learned_positions);  // linear biases no longer imply learned positions
  EXPECT_FALSE(s.untied_output);
  EXPECT_EQ(s.pp, 4);
  llm->set_linear_bias(false);
  llm->set_position_embedding(scenario::Transformer::POSITION_LEARNED);
  llm->set_untie_embeddings_and_output_weights(true);
  s = layer_shape(spec);
  EXPECT_TRUE(s.learned_positions);
  EXPECT_TRUE(s.untied_output);
  llm->set_position_embedding(scenario::Transformer::POSITION_NONE);
  EXPECT_FALSE(layer_shape(spec).learned_positions);
}

TEST(Parameters, ShardsCoverTheModel) {
  LayerShape s = gpt3();
  const int64_t whole = layer_parameters(s);
  s.tp = 8;
  // Row-parallel biases (proj, FC2) and both LayerNorms are replicated.
  const int64_t replicated = 2 * s.hidden + 4 * s.hidden;
  EXPECT_EQ(8 * (layer_parameters(s) - replicated) + replicated, whole);
  EXPECT_EQ(embedding_parameters(s), 51200 / 8 * 12288 + 2048 * 12288);
  s.pp = 8;  // tied: the last stage's copy of the embedding
  EXPECT_EQ(head_parameters(s), 51200 / 8 * 12288 + 2 * 12288);
}

TEST(ModelFlops, Gpt3IterationMatchesSarEquation7) {
  const LayerShape s = gpt3(2);
  const double B = 1536, sq = 2048, l = 96, h = 12288, V = 51200;
  const double eq7 = 72 * B * sq * l * h * h * (1 + sq / (6 * h) + V / (12 * h * l));
  EXPECT_NEAR(model_flops_per_iteration(s, 96, 1536) / eq7, 1.0, 1e-12);
}

TEST(ModelFlops, GqaAndSwigluChangeTheLinearTerms) {
  const LayerShape s = unsharded(llama2_70b(), 1);
  const double t = 4096, h = 8192, kv = 1024, f = 28672;
  const double expected = 2 * t * (h * (h + 2 * kv) + h * h + 3 * h * f) + 4 * t * 4096 * h;
  EXPECT_DOUBLE_EQ(layer_model_flops_forward(s), expected);
}

TEST(Head, LogitsAndLossPerRank) {
  LayerShape s = gpt3(2);
  s.tp = 8;
  s.sequence_parallel = true;
  double gemm = 0;
  int ce = 0;
  for (const auto& st : head_forward(s))
    if (const auto* k = std::get_if<Kernel>(&st)) {
      if (k->op_class == ir::GEMM) gemm += k->flops;
      ce += k->op_class == ir::CROSS_ENTROPY;
    }
  EXPECT_DOUBLE_EQ(gemm, 2.0 * 2 * 2048 * 12288 * (51200 / 8));
  EXPECT_DOUBLE_EQ(head_model_flops_forward(s), gemm);
  EXPECT_EQ(ce, 1);
  EXPECT_EQ(head_activation_bytes(s).count(), 2 * 2048 / 8 * 12288 * 2 + 2 * 2048 * 12288 * 2 + 2 * 2048 * 6400 * 4);
}

}  // namespace
}  // namespace lacuna::model

namespace lacuna::model {
namespace {

// Calibration tables key on the kernel variant: a backward kernel with its
// forward's shape must not be mistaken for it, and GEMM variants fix the
// operand layouts a benchmark runs.
TEST(KernelVariant, IrFormCarriesTheVariantOfThePhase) {
  const LayerShape s = gpt3();
  std::map<ir::KernelVariant, int> gemms;
  for (const Step& st : layer_backward(s, scenario::RECOMPUTE_SELECTIVE)) {
    const auto* k = std::get_if<Kernel>(&st);
    if (k == nullptr) continue;
    const ir::Compute c = to_compute(*k);
    EXPECT_EQ(c.op_class(), k->op_class);
    EXPECT_EQ(c.role(), k->role);
    EXPECT_EQ(c.flops(), k->flops);
    EXPECT_EQ(c.bytes(), k->bytes);
    EXPECT_EQ(std::vector<int64_t>(c.shape().begin(), c.shape().end()), k->shape);
    EXPECT_EQ(c.variant(), variant_of(k->phase));
    if (k->op_class == ir::GEMM) ++gemms[c.variant()];
    if (k->phase == ir::RECOMPUTE) EXPECT_EQ(c.variant(), ir::VARIANT_FORWARD) << "recompute runs forward kernels";
  }
  // Four linears per layer: each has one dgrad and one wgrad.
  EXPECT_EQ(gemms[ir::VARIANT_BACKWARD_INPUT], 4);
  EXPECT_EQ(gemms[ir::VARIANT_BACKWARD_WEIGHT], 4);
  EXPECT_EQ(variant_of(ir::FORWARD), ir::VARIANT_FORWARD);
  EXPECT_EQ(variant_of(ir::OPTIMIZER_STEP), ir::VARIANT_FORWARD);
}

}  // namespace
}  // namespace lacuna::model
