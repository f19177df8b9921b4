#include <gtest/gtest.h>

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
  EXPECT_EQ(bw.tp, (std::map<ir::CollectiveKind, int>{{ir::ALL_GATHER, 2}, {ir::REDUCE_SCATTER, 2}}));
  EXPECT_EQ(f.tp_bytes, 4 * bsh2);
  Sums full = sum(layer_backward(s, scenario::RECOMPUTE_FULL));
  EXPECT_EQ(full.tp, (std::map<ir::CollectiveKind, int>{{ir::ALL_GATHER, 4}, {ir::REDUCE_SCATTER, 4}}));

  s.parallel_attention_mlp = true;
  f = sum(layer_forward(s));
  bw = sum(layer_backward(s, scenario::RECOMPUTE_NONE));
  EXPECT_EQ(f.tp, (std::map<ir::CollectiveKind, int>{{ir::ALL_GATHER, 1}, {ir::REDUCE_SCATTER, 1}}));
  EXPECT_EQ(bw.tp, (std::map<ir::CollectiveKind, int>{{ir::ALL_GATHER, 1}, {ir::REDUCE_SCATTER, 1}}));

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

  const Kernel opt = adam_step(1000);
  EXPECT_EQ(opt.op_class, ir::OPTIMIZER);
  EXPECT_DOUBLE_EQ(opt.bytes, 30.0 * 1000);
}

TEST(Parameters, Gpt3MatchesPtdPEquation2PlusFinalNorm) {
  const LayerShape s = gpt3();
  const double l = 96, h = 12288, V = 51200, sq = 2048;
  const double eq2 = 12 * l * h * h * (1 + 13 / (12 * h) + (V + sq) / (12 * l * h));
  EXPECT_DOUBLE_EQ(static_cast<double>(model_parameters(s, 96)), eq2 + 2 * h);
  EXPECT_NEAR(static_cast<double>(model_parameters(s, 96)), 174.6e9, 0.1e9);
}

TEST(Parameters, Llama2With70BMatchesTheReleasedCheckpoint) {
  const LayerShape s = llama2_70b();
  // HF's count (untied output layer): model_parameters is tied, add it back.
  EXPECT_EQ(model_parameters(s, 80) + s.vocab * s.hidden, 68'976'648'192);
}

TEST(Parameters, ShardsCoverTheModel) {
  LayerShape s = gpt3();
  const int64_t whole = layer_parameters(s);
  s.tp = 8;
  // Row-parallel biases (proj, FC2) and both LayerNorms are replicated.
  const int64_t replicated = 2 * s.hidden + 4 * s.hidden;
  EXPECT_EQ(8 * (layer_parameters(s) - replicated) + replicated, whole);
  EXPECT_EQ(embedding_parameters(s), 51200 / 8 * 12288 + 2048 * 12288);
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
  EXPECT_EQ(head_activation_bytes(s), 2 * 2048 / 8 * 12288 * 2 + 2 * 2048 * 12288 * 2 + 2 * 2048 * 6400 * 4);
}

}  // namespace
}  // namespace lacuna::model
