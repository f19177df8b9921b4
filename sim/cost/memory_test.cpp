// Activation memory against SAR's closed forms (Korthikanti et al. 2022,
// Table 2) and the generalisations of docs/memory-model.md; model state
// against Megatron-LM's mixed-precision / distributed-optimizer bytes.
#include "sim/cost/memory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/core/error.h"

namespace lacuna::cost {
namespace {

using i128 = __int128;

// ceil(num / den) of an exact rational: SAR's forms are sbh·(p/q).
int64_t ceil_rational(i128 num, i128 den) { return static_cast<int64_t>((num + den - 1) / den); }

struct Shape {
  int64_t s, h, a;
};
// SAR Table 5 models: 22B, 175B (GPT-3), 530B, 1T; s = 2048.
constexpr Shape kSarModels[] = {{2048, 6144, 64}, {2048, 12288, 96}, {2048, 20480, 128}, {2048, 25600, 160}};

LayerActivationInputs gelu_mha(const Shape& m, int64_t b, int64_t t) {
  LayerActivationInputs in;
  in.seq_length = m.s;
  in.micro_batch = b;
  in.hidden = m.h;
  in.num_heads = m.a;
  in.num_kv_heads = m.a;
  in.ffn_hidden = 4 * m.h;
  in.activation = scenario::GELU;
  in.tp = t;
  in.flash_attention = false;  // SAR's attention keeps the softmax
  return in;
}

class SarClosedForms : public ::testing::TestWithParam<std::tuple<int, int64_t, int64_t>> {};

TEST_P(SarClosedForms, AllRowsOfTable2) {
  const auto [model, b, t] = GetParam();
  const Shape m = kSarModels[model];
  const i128 s = m.s, h = m.h, a = m.a, sbh = s * b * h;
  LayerActivationInputs in = gelu_mha(m, b, t);

  if (t == 1) {  // no parallelism: sbh(34 + 5as/h)
    EXPECT_EQ(layer_activation_bytes(in).count(), ceil_rational(sbh * (34 * h + 5 * a * s), h));
  }
  // TP: sbh(10 + 24/t + 5as/(ht))
  EXPECT_EQ(layer_activation_bytes(in).count(), ceil_rational(sbh * (10 * h * t + 24 * h + 5 * a * s), h * t));
  // TP + SP: sbh/t · (34 + 5as/h)
  in.sequence_parallel = true;
  EXPECT_EQ(layer_activation_bytes(in).count(), ceil_rational(sbh * (34 * h + 5 * a * s), h * t));
  // TP + SP + selective: 34 sbh / t
  in.recompute = scenario::RECOMPUTE_SELECTIVE;
  EXPECT_EQ(layer_activation_bytes(in).count(), ceil_rational(sbh * 34, t));
  // TP + selective: sbh(10 + 24/t)
  in.sequence_parallel = false;
  EXPECT_EQ(layer_activation_bytes(in).count(), ceil_rational(sbh * (10 * t + 24), t));
  // Full recompute: the layer input 2sbh (÷t when SP shards it)
  in.recompute = scenario::RECOMPUTE_FULL;
  EXPECT_EQ(layer_activation_bytes(in).count(), static_cast<int64_t>(2 * sbh));
  in.sequence_parallel = true;
  EXPECT_EQ(layer_activation_bytes(in).count(), ceil_rational(2 * sbh, t));
  // FlashAttention drops the 5as/h term like selective recompute.
  in.recompute = scenario::RECOMPUTE_NONE;
  in.flash_attention = true;
  EXPECT_EQ(layer_activation_bytes(in).count(), ceil_rational(sbh * 34, t));
  in.sequence_parallel = false;
  EXPECT_EQ(layer_activation_bytes(in).count(), ceil_rational(sbh * (10 * t + 24), t));
}

INSTANTIATE_TEST_SUITE_P(Models, SarClosedForms,
                         ::testing::Combine(::testing::Values(0, 1, 2, 3), ::testing::Values<int64_t>(1, 4),
                                            ::testing::Values<int64_t>(1, 2, 4, 8)));

// A worked number: GPT-3 175B, b = 1, t = 8, SP + selective = 34·2048·12288/8.
TEST(ActivationMemory, Gpt3LayerWithSpAndSelective) {
  LayerActivationInputs in = gelu_mha(kSarModels[1], 1, 8);
  in.sequence_parallel = true;
  in.recompute = scenario::RECOMPUTE_SELECTIVE;
  EXPECT_EQ(layer_activation_bytes(in).count(), 106'954'752);
}

// Llama-3 70B-like layer, flash attention, TP 8 with SP.
LayerActivationInputs llama_like() {
  LayerActivationInputs in;
  in.seq_length = 8192;
  in.micro_batch = 1;
  in.hidden = 8192;
  in.num_heads = 64;
  in.num_kv_heads = 8;
  in.ffn_hidden = 28672;
  in.activation = scenario::SWIGLU;
  in.tp = 8;
  in.sequence_parallel = true;
  return in;
}

TEST(ActivationMemory, SwigluStoresBothFc1Outputs) {
  LayerActivationInputs swiglu = llama_like();
  LayerActivationInputs gelu = swiglu;
  gelu.activation = scenario::GELU;
  const int64_t s = swiglu.seq_length, b = 1, f = swiglu.ffn_hidden, t = 8;
  EXPECT_EQ(layer_activation_bytes(swiglu).count() - layer_activation_bytes(gelu).count(), 2 * s * b * f / t);
}

TEST(ActivationMemory, GqaShrinksKeysAndValues) {
  LayerActivationInputs gqa = llama_like();
  LayerActivationInputs mha = gqa;
  mha.num_kv_heads = mha.num_heads;
  const int64_t s = gqa.seq_length, d = gqa.hidden / gqa.num_heads, t = 8;
  EXPECT_EQ(layer_activation_bytes(mha).count() - layer_activation_bytes(gqa).count(), 2 * 2 * s * (64 - 8) * d / t);
  // num_kv_heads 0 means plain MHA.
  LayerActivationInputs unset = mha;
  unset.num_kv_heads = 0;
  EXPECT_EQ(layer_activation_bytes(unset).count(), layer_activation_bytes(mha).count());
}

TEST(ActivationMemory, FfnSizeScalesTheMlpTensors) {
  LayerActivationInputs base = gelu_mha(kSarModels[1], 1, 8);
  LayerActivationInputs wide = base;
  wide.ffn_hidden = 6 * base.hidden;
  const int64_t s = 2048, h = 12288, t = 8;
  // GELU input and FC2 input: 2 + 2 bytes per FFN element.
  EXPECT_EQ(layer_activation_bytes(wide).count() - layer_activation_bytes(base).count(), 4 * s * (6 * h - 4 * h) / t);
}

TEST(ActivationMemory, ParallelAttentionMlpSharesTheNormOutput) {
  LayerActivationInputs serial = gelu_mha(kSarModels[1], 1, 8);
  LayerActivationInputs parallel = serial;
  parallel.parallel_attention_mlp = true;
  const int64_t sbh = 2048 * 12288;
  // One norm input (2sbh) and one norm output shared by QKV and FC1 (2sbh).
  EXPECT_EQ(layer_activation_bytes(serial).count() - layer_activation_bytes(parallel).count(), 4 * sbh);
  serial.sequence_parallel = parallel.sequence_parallel = true;
  EXPECT_EQ(layer_activation_bytes(serial).count() - layer_activation_bytes(parallel).count(), 4 * sbh / 8);
}

TEST(ActivationMemory, ContextParallelismSplitsTheSequence) {
  LayerActivationInputs one = llama_like();
  LayerActivationInputs two = one;
  two.cp = 2;
  EXPECT_EQ(layer_activation_bytes(two).count() * 2, layer_activation_bytes(one).count());
  // Without flash attention a rank keeps its queries' scores against all keys.
  LayerActivationInputs no_flash = gelu_mha(kSarModels[1], 1, 8);
  no_flash.sequence_parallel = true;
  no_flash.cp = 2;
  const i128 s = 2048, h = 12288, a = 96, t = 8, sl = s / 2;
  EXPECT_EQ(layer_activation_bytes(no_flash).count(), ceil_rational(34 * sl * h + 5 * a * sl * s, t));
}

TEST(ActivationMemory, MoreTensorParallelismNeverNeedsMore) {
  int64_t previous = INT64_MAX;
  for (int64_t t : {1, 2, 4, 8, 16}) {
    LayerActivationInputs in = llama_like();
    in.sequence_parallel = false;
    in.tp = t;
    EXPECT_LT(layer_activation_bytes(in).count(), previous);
    previous = layer_activation_bytes(in).count();
  }
}

TEST(ActivationMemory, RejectsInconsistentShapes) {
  LayerActivationInputs in = llama_like();
  in.hidden = 8100;  // not a multiple of 64 heads
  EXPECT_THROW(layer_activation_bytes(in), Error);
  in = llama_like();
  in.cp = 3;
  EXPECT_THROW(layer_activation_bytes(in), Error);
  in = llama_like();
  in.micro_batch = 0;
  EXPECT_THROW(layer_activation_bytes(in), Error);
}

// Megatron-LM mixed precision: 2 (bf16 weights) + 4 (fp32 grads) bytes per
// parameter, plus 12 (fp32 master, Adam m, v), divided over DP with the
// distributed optimizer.
TEST(ModelState, BytesPerParameter) {
  const int64_t p = 1'000'000'000;
  const ModelStateBytes dist = model_state_bytes(p, 8, true);
  EXPECT_EQ(dist.weights, Bytes(2 * p));
  EXPECT_EQ(dist.gradients, Bytes(4 * p));
  EXPECT_EQ(dist.optimizer, Bytes(12 * p / 8));
  const ModelStateBytes plain = model_state_bytes(p, 8, false);
  EXPECT_EQ(plain.optimizer, Bytes(12 * p));
  EXPECT_EQ(model_state_bytes(p, 1, true).optimizer, Bytes(12 * p));
  // Not divisible: rounded up so that no byte is lost.
  EXPECT_EQ(model_state_bytes(1, 8, true).optimizer, Bytes(2));
  EXPECT_THROW(model_state_bytes(p, 0, true), Error);
}

}  // namespace
}  // namespace lacuna::cost
