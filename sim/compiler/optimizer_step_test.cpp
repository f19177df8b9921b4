// The optimizer step as compiled kernels (docs/compiler.md#optimizer-step,
// docs/kernels.md#optimizer-step): per rank, over its shard n, the kernels in
// Megatron-LM's order with the documented bytes per parameter, and the
// gradient buffer's memset and DP reduction at the gradient precision.
#include <gtest/gtest.h>

#include <vector>

#include "sim/compiler/compile.h"
#include "sim/compiler/compiler_test_support.h"

namespace lacuna::compiler {
namespace {

using testing::make_scenario;
using testing::Small;

// Parameters each pipeline rank trains in the compiler tests' small GPT
// (tp 2, pp 2: two layers per rank), counted by hand. Per layer and TP rank
// (h = 256, 4 heads of 32, f = 512 per rank, biases):
//   QKV 256·384 + 384, projection 128·256 + 256 (replicated bias),
//   FC1 256·512 + 512, FC2 512·256 + 256, two LayerNorms 2·2·256.
constexpr int64_t kLayer = (256 * 384 + 384) + (128 * 256 + 256) + (256 * 512 + 512) + (512 * 256 + 256) + 2 * 2 * 256;
// Rank 0: the vocabulary slice 512·256 and learned positions 128·256;
// rank 1: the tied output layer's copy 512·256 and the final LayerNorm.
constexpr int64_t kRank[] = {2 * kLayer + 512 * 256 + 128 * 256, 2 * kLayer + 512 * 256 + 2 * 256};

struct Expect {
  ir::KernelRole role;
  int64_t bytes_per_param;  // the shape's second entry where it has one
};

// The compute kernels of the rank's optimizer step, in order.
std::vector<const ir::Op*> step_kernels(const ir::RankClass& c) {
  std::vector<const ir::Op*> out;
  for (const auto& st : c.streams())
    if (st.kind() == ir::COMPUTE)
      for (const auto& op : st.ops())
        if (op.has_compute() && op.phase() == ir::OPTIMIZER_STEP) out.push_back(&op);
  return out;
}

void expect_step(const Small& s, const std::vector<Expect>& want, bool sharded) {
  const ir::Program p = compile(make_scenario(s));
  ASSERT_EQ(p.classes_size(), 2);
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE("pp rank " + std::to_string(r));
    const int64_t n = sharded ? kRank[r] / s.dp : kRank[r];
    const auto ks = step_kernels(p.classes(r));
    ASSERT_EQ(ks.size(), want.size());
    for (size_t i = 0; i < ks.size(); ++i) {
      const ir::Compute& k = ks[i]->compute();
      SCOPED_TRACE(ir::KernelRole_Name(want[i].role));
      EXPECT_EQ(k.role(), want[i].role);
      ASSERT_GE(k.shape_size(), 1);
      EXPECT_EQ(k.shape(0), n);
      EXPECT_EQ(k.flops(), 0);
      // Adam's shape is [n]; the streaming passes name their bytes per element.
      if (want[i].role == ir::ROLE_OPTIMIZER_STEP) {
        EXPECT_EQ(k.shape_size(), 1);
      } else {
        ASSERT_EQ(k.shape_size(), 2);
        EXPECT_EQ(k.shape(1), want[i].bytes_per_param);
      }
      EXPECT_DOUBLE_EQ(k.bytes(), static_cast<double>(want[i].bytes_per_param * n));
    }
  }
}

TEST(OptimizerStep, Bf16ClipsThenAdamThenCopiesOverTheShard) {
  // Megatron-core's default: clip 1.0, fp32 gradients. Distributed optimizer
  // over dp = 2: each rank updates half its parameters.
  expect_step(Small{}, {{ir::ROLE_GRAD_NORM, 4}, {ir::ROLE_GRAD_CLIP, 8}, {ir::ROLE_OPTIMIZER_STEP, 28},
                        {ir::ROLE_PARAM_COPY, 6}},
              true);
}

TEST(OptimizerStep, WithoutTheDistributedOptimizerEveryRankUpdatesAll) {
  Small s;
  s.distributed_optimizer = false;
  s.overlap_param = false;
  expect_step(s, {{ir::ROLE_GRAD_NORM, 4}, {ir::ROLE_GRAD_CLIP, 8}, {ir::ROLE_OPTIMIZER_STEP, 28},
                  {ir::ROLE_PARAM_COPY, 6}},
              false);
}

TEST(OptimizerStep, NoClipNoNorm) {
  Small s;
  s.execution.set_clip_grad(0);
  expect_step(s, {{ir::ROLE_OPTIMIZER_STEP, 28}, {ir::ROLE_PARAM_COPY, 6}}, true);
}

TEST(OptimizerStep, Fp16CopiesGradientsToFp32AndUnscalesFirst) {
  scenario::LoadedScenario ls = make_scenario(Small{});
  ls.spec.mutable_training()->set_precision(scenario::FP16);
  const ir::Program p = compile(ls);
  const std::vector<ir::KernelRole> want = {ir::ROLE_GRAD_TO_FP32, ir::ROLE_GRAD_UNSCALE, ir::ROLE_GRAD_NORM,
                                            ir::ROLE_GRAD_CLIP, ir::ROLE_OPTIMIZER_STEP, ir::ROLE_PARAM_COPY};
  const int64_t per_param[] = {2 + 4, 4 + 4, 4, 8, 28, 6};
  for (int r = 0; r < 2; ++r) {
    const auto ks = step_kernels(p.classes(r));
    ASSERT_EQ(ks.size(), want.size());
    for (size_t i = 0; i < ks.size(); ++i) {
      EXPECT_EQ(ks[i]->compute().role(), want[i]) << i;
      EXPECT_DOUBLE_EQ(ks[i]->compute().bytes(), static_cast<double>(per_param[i] * (kRank[r] / 2))) << i;
    }
  }
}

// The main_grad buffer: zeroed at the iteration start over every parameter
// the rank holds, reduce-scattered over DP, at the gradient precision;
// parameters all-gathered in bf16.
void expect_gradient_buffer(scenario::Precision precision, int64_t grad_bytes) {
  scenario::LoadedScenario ls = make_scenario(Small{});
  ls.spec.mutable_training()->set_precision(precision);
  const ir::Program p = compile(ls);
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE("pp rank " + std::to_string(r));
    const ir::RankClass& c = p.classes(r);
    int64_t zero = 0, reduce = 0, gather = 0, zero_ops = 0;
    for (const auto& st : c.streams())
      for (const auto& op : st.ops()) {
        if (op.has_compute() && op.compute().role() == ir::ROLE_GRAD_ZERO) {
          ++zero_ops;
          EXPECT_EQ(op.phase(), ir::DP_SYNC);
          EXPECT_EQ(op.compute().shape(1), grad_bytes);
          zero += static_cast<int64_t>(op.compute().bytes());
        }
        if (st.kind() == ir::DP_COMM && op.has_collective()) {
          if (op.collective().kind() == ir::REDUCE_SCATTER) reduce += op.collective().bytes();
          if (op.collective().kind() == ir::ALL_GATHER) gather += op.collective().bytes();
        }
      }
    EXPECT_EQ(zero_ops, 1);
    EXPECT_EQ(zero, kRank[r] * grad_bytes);
    EXPECT_EQ(reduce, kRank[r] * grad_bytes);
    EXPECT_EQ(gather, kRank[r] * 2);
  }
}

TEST(OptimizerStep, GradientsAreFp32WithBf16) { expect_gradient_buffer(scenario::BF16, 4); }
TEST(OptimizerStep, GradientsAre16BitWithFp16) { expect_gradient_buffer(scenario::FP16, 2); }

}  // namespace
}  // namespace lacuna::compiler
