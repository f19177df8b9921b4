#include "sim/cost/roofline.h"

#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/core/error.h"
#include "sim/cost/test_clusters.h"

namespace lacuna::cost {
namespace {

using testing::dgx_a100;
using testing::hgx_hopper;

ir::Compute op(ir::OpClass cls, double flops, double bytes) {
  ir::Compute c;
  c.set_op_class(cls);
  c.set_flops(flops);
  c.set_bytes(bytes);
  return c;
}

// A GEMM is compute-bound: 2·8192³ FLOPs at 0.8 × 989 TFLOP/s + 3 µs.
TEST(Roofline, ComputeBoundGemm) {
  RooflineModel m(hgx_hopper(1).gpu(), scenario::BF16);
  const double flops = 2.0 * 8192 * 8192 * 8192;
  const double bytes = 3.0 * 8192 * 8192 * 2;
  const double expect_s = flops / (989e12 * 0.8) + 3e-6;
  EXPECT_EQ(m.time(op(ir::GEMM, flops, bytes)), TimeNs::from_seconds(expect_s));
  // Published: ≈798 TFLOP/s measured on one H100 for this GEMM (§2).
  const double measured_s = flops / 798e12;
  EXPECT_NEAR(m.time(op(ir::GEMM, flops, bytes)).seconds(), measured_s, 0.05 * measured_s);
}

// An element-wise kernel is memory-bound at 0.8 × 3.35 TB/s.
TEST(Roofline, MemoryBoundElementwise) {
  RooflineModel m(hgx_hopper(1).gpu(), scenario::BF16);
  const double bytes = 1e9;
  // ELEMENTWISE sets only memory; its flops efficiency falls back to DEFAULT.
  EXPECT_EQ(m.time(op(ir::ELEMENTWISE, 1e9, bytes)), TimeNs::from_seconds(bytes / (3350e9 * 0.8) + 3e-6));
}

TEST(Roofline, TakesTheSlowerOfTheTwoRoofs) {
  RooflineModel m(hgx_hopper(1).gpu(), scenario::BF16);
  const double peak = 989e12 * 0.8, bw = 3350e9 * 0.85;  // GEMM efficiencies
  const double bytes = 1e8;
  const double balance = bytes / bw * peak;  // FLOPs where both roofs meet
  const TimeNs at_balance = m.time(op(ir::GEMM, balance, bytes));
  EXPECT_EQ(m.time(op(ir::GEMM, balance / 2, bytes)), at_balance);  // memory-bound: FLOPs don't matter
  EXPECT_GT(m.time(op(ir::GEMM, balance * 2, bytes)), at_balance);
  EXPECT_EQ(m.time(op(ir::GEMM, balance * 2, bytes)), TimeNs::from_seconds(2 * balance / peak + 3e-6));
}

TEST(Roofline, ZeroWorkCostsTheLaunchOverhead) {
  RooflineModel h(hgx_hopper(1).gpu(), scenario::BF16);
  EXPECT_EQ(h.time(op(ir::LAYERNORM, 0, 0)), TimeNs(3000));
  RooflineModel a(dgx_a100(1).gpu(), scenario::BF16);
  EXPECT_EQ(a.time(op(ir::GEMM, 0, 0)), TimeNs(4000));
}

TEST(Roofline, UnknownClassFallsBackToDefault) {
  RooflineModel m(hgx_hopper(1).gpu(), scenario::BF16);
  const double flops = 1e12;
  EXPECT_EQ(m.time(op(ir::ATTENTION, flops, 0)), TimeNs::from_seconds(flops / (989e12 * 0.5) + 3e-6));
}

TEST(Roofline, MissingKeyWithoutDefaultNamesTheKey) {
  auto gpu = hgx_hopper(1).gpu();
  gpu.mutable_efficiency()->erase("DEFAULT");
  RooflineModel m(gpu, scenario::BF16);
  EXPECT_GT(m.time(op(ir::GEMM, 1e9, 1e6)), TimeNs::zero());
  EXPECT_THAT([&] { m.time(op(ir::ATTENTION, 1e9, 1e6)); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("ATTENTION")));
  // ELEMENTWISE has memory but no flops efficiency of its own.
  EXPECT_THAT([&] { m.time(op(ir::ELEMENTWISE, 1e9, 1e6)); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("ELEMENTWISE")));
}

// The op's precision selects the peak; an FP8 program's untagged ops run at
// its BF16 base (docs/fp8.md#cost), its FP8-tagged GEMMs at the FP8 peak.
TEST(Roofline, PrecisionSelectsThePeak) {
  RooflineModel bf16(hgx_hopper(1).gpu(), scenario::BF16);
  RooflineModel fp8(hgx_hopper(1).gpu(), scenario::FP8);
  const double flops = 1e15;
  const double bf16_s = bf16.time(op(ir::GEMM, flops, 0)).seconds() - 3e-6;
  ir::Compute tagged = op(ir::GEMM, flops, 0);
  tagged.set_precision(scenario::FP8);
  const double fp8_s = fp8.time(tagged).seconds() - 3e-6;
  EXPECT_NEAR(bf16_s / fp8_s, 1979.0 / 989.0, 1e-6);
  EXPECT_EQ(fp8.time(op(ir::GEMM, flops, 0)), bf16.time(op(ir::GEMM, flops, 0)));
  EXPECT_THAT([] { RooflineModel(dgx_a100(1).gpu(), scenario::FP8); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("peak_fp8_tflops")));
  EXPECT_THROW(RooflineModel(dgx_a100(1).gpu(), scenario::PRECISION_UNSPECIFIED), Error);
}

// Rounded once to the nearest nanosecond.
TEST(Roofline, RoundsToNearestNanosecond) {
  auto gpu = hgx_hopper(1).gpu();
  gpu.set_kernel_overhead_us(0);
  RooflineModel m(gpu, scenario::BF16);
  const double per_ns = 3350e9 * 0.8 * 1e-9;  // ELEMENTWISE bytes per ns
  EXPECT_EQ(m.time(op(ir::ELEMENTWISE, 0, 1.4 * per_ns)), TimeNs(1));
  EXPECT_EQ(m.time(op(ir::ELEMENTWISE, 0, 1.6 * per_ns)), TimeNs(2));
}

TEST(Roofline, FixedDurationIsTakenAsIs) {
  RooflineModel m(hgx_hopper(1).gpu(), scenario::BF16);
  ir::Compute c = op(ir::GEMM, 1e15, 1e9);
  c.set_fixed_duration_ns(1234);
  EXPECT_EQ(m.time(c), TimeNs(1234));
}

TEST(Roofline, RejectsBadEfficienciesAndWork) {
  auto gpu = hgx_hopper(1).gpu();
  testing::set_efficiency(&gpu, "GEMM", 1.2, 0.8);
  EXPECT_THAT([&] { RooflineModel(gpu, scenario::BF16); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("efficiency[GEMM].flops")));
  auto typo = hgx_hopper(1).gpu();
  testing::set_efficiency(&typo, "GEM", 0.8, 0.8);
  EXPECT_THROW(RooflineModel(typo, scenario::BF16), Error);
  RooflineModel m(hgx_hopper(1).gpu(), scenario::BF16);
  EXPECT_THROW(m.time(op(ir::GEMM, -1, 0)), Error);
}

// A per-shape model on the test H100: 128×128 tiles, one per SM, and a K
// ramp of 64; FlashAttention blocks of 128 queries with 100 keys of overhead.
scenario::GpuSpec hopper_with_shapes() {
  scenario::GpuSpec gpu = hgx_hopper(1).gpu();
  auto* s = gpu.mutable_shape_model();
  auto* t = s->add_gemm_tiles();
  t->set_m(128);
  t->set_n(128);
  s->set_gemm_ctas_per_sm(1);
  s->set_gemm_k_overhead(64);
  s->set_gemm_max_split_k(1);
  s->set_attention_block_q(128);
  s->set_attention_kv_overhead(100);
  s->set_attention_head_dim_overhead(0);
  testing::set_efficiency(&gpu, "ATTENTION", 0.7, 0.85);
  return gpu;
}

ir::Compute shaped(ir::OpClass cls, std::vector<int64_t> shape, double flops, double bytes) {
  ir::Compute c = op(cls, flops, bytes);
  for (int64_t d : shape) c.add_shape(d);
  return c;
}

// 143 tiles of 128×128 on 132 SMs run in two waves, 143/264 full, and K =
// 192 runs its main loop at 192/256: the FLOP roof slows by both factors.
TEST(Roofline, ShapeFactorSlowsTheFlopRoof) {
  const RooflineModel m(hopper_with_shapes(), scenario::BF16);
  const int64_t M = 128 * 13, N = 128 * 11, K = 192;
  const double flops = 2.0 * M * N * K;
  const ir::Compute g = shaped(ir::GEMM, {M, N, K}, flops, 0);
  const double factor = 143.0 / 264.0 * 192.0 / 256.0;
  EXPECT_DOUBLE_EQ(m.flops_efficiency(g), 0.8 * factor);
  EXPECT_EQ(m.time(g), TimeNs::from_seconds(flops / (989e12 * 0.8 * factor) + 3e-6));
  // The same GEMM memory-bound: bytes do not care about tiles.
  const double bytes = flops / (989e12 * 0.8 * factor) * 3350e9 * 0.85 * 4;
  EXPECT_EQ(m.time(shaped(ir::GEMM, {M, N, K}, flops, bytes)), TimeNs::from_seconds(bytes / (3350e9 * 0.85) + 3e-6));
  // Memory-bound classes keep their roofline: the launch overhead is their floor.
  EXPECT_EQ(m.time(shaped(ir::LAYERNORM, {4096, 8192}, 0, 0)), TimeNs(3000));
}

// Attention: 16 × 16 × (4096/128) CTAs = 62 waves of 132 (8192 CTAs) each
// paying 100 keys on 4096 — the schedule's own result, applied to the class.
TEST(Roofline, AttentionUsesItsSchedule) {
  const scenario::GpuSpec gpu = hopper_with_shapes();
  const RooflineModel m(gpu, scenario::BF16);
  const ir::Compute a = shaped(ir::ATTENTION, {16, 16, 4096, 4096, 128, 0, 16}, 1e12, 0);
  const double factor = m.shapes().attention(16, 16, 4096, 4096, 128, false).factor;
  EXPECT_LT(factor, 4096.0 / 4196.0);
  EXPECT_GT(factor, 0.9 * 4096.0 / 4196.0);
  EXPECT_DOUBLE_EQ(m.flops_efficiency(a), 0.7 * factor);
  EXPECT_EQ(m.time(a), TimeNs::from_seconds(1e12 / (989e12 * 0.7 * factor) + 3e-6));
}

// `flat: true` is lacuna's roofline before per-shape efficiency, to the
// nanosecond, for any op.
TEST(Roofline, FlatSwitchReproducesTheClassRoofline) {
  scenario::GpuSpec flat = hopper_with_shapes();
  flat.mutable_shape_model()->set_flat(true);
  scenario::GpuSpec old = hopper_with_shapes();
  old.clear_shape_model();
  const RooflineModel a(flat, scenario::BF16), b(old, scenario::BF16), shaped_model(hopper_with_shapes(), scenario::BF16);
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int64_t> dim(1, 20000);
  std::uniform_real_distribution<double> work(0, 1e13);
  int differs = 0;
  for (int i = 0; i < 2000; ++i) {
    const ir::OpClass cls = i % 3 == 0 ? ir::GEMM : i % 3 == 1 ? ir::ATTENTION : ir::RMSNORM;
    const std::vector<int64_t> shape = cls == ir::GEMM        ? std::vector<int64_t>{dim(rng), dim(rng), dim(rng)}
                                       : cls == ir::ATTENTION ? std::vector<int64_t>{1, 8, 2048, 2048, 128, 1, 8}
                                                              : std::vector<int64_t>{dim(rng), dim(rng)};
    const ir::Compute c = shaped(cls, shape, work(rng), work(rng) / 100);
    ASSERT_EQ(a.time(c), b.time(c));
    if (shaped_model.time(c) != b.time(c)) ++differs;
  }
  EXPECT_GT(differs, 100);  // and the shaped model really is different
}

}  // namespace
}  // namespace lacuna::cost
