#include "sim/cost/roofline.h"

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

TEST(Roofline, PrecisionSelectsThePeak) {
  RooflineModel bf16(hgx_hopper(1).gpu(), scenario::BF16);
  RooflineModel fp8(hgx_hopper(1).gpu(), scenario::FP8);
  const double flops = 1e15;
  const double bf16_s = bf16.time(op(ir::GEMM, flops, 0)).seconds() - 3e-6;
  const double fp8_s = fp8.time(op(ir::GEMM, flops, 0)).seconds() - 3e-6;
  EXPECT_NEAR(bf16_s / fp8_s, 1979.0 / 989.0, 1e-6);
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

}  // namespace
}  // namespace lacuna::cost
