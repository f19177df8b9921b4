#include "sim/calibration/fit.h"

#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "sim/calibration/calibration_test_support.h"
#include "sim/core/error.h"

namespace lacuna::calibration {
namespace {

using namespace calibration::testing;

// Points of `time = max(flops/F, bytes/B) + o` exactly (rounded to ns).
calib::OpTable synthetic(double F, double B, double o, bool with_flops) {
  calib::OpTable t;
  t.set_op_class(with_flops ? ir::GEMM : ir::LAYERNORM);
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> logu(0, 1);
  for (int i = 0; i < 40; ++i) {
    // Spread sizes over 3 decades and intensities over both sides of the ridge.
    const double bytes = std::pow(10.0, 5 + 3 * logu(rng));
    const double intensity = with_flops ? std::pow(10.0, 1 + 3 * logu(rng)) : 0.0;  // FLOPs per byte
    const double flops = bytes * intensity;
    const double ns = std::max(with_flops ? flops / F * 1e9 : 0.0, bytes / B * 1e9) + o;
    *t.add_points() = point({1000 + i, 64}, std::llround(ns), flops, bytes);
  }
  return t;
}

TEST(FitRoofline, RecoversComputeAndMemoryRatesAndOverhead) {
  // Ridge at 300 FLOP/byte: points above and below it.
  const double F = 600e12, B = 2e12, o = 4000;
  const calib::RooflineFit fit = fit_roofline(synthetic(F, B, o, true));
  EXPECT_NEAR(fit.flops_per_s() / F, 1.0, 0.01);
  EXPECT_NEAR(fit.bytes_per_s() / B, 1.0, 0.01);
  EXPECT_NEAR(fit.overhead_ns() / o, 1.0, 0.01);
  EXPECT_LT(fit.rms_relative_error(), 1e-3);
}

TEST(FitRoofline, ZeroFlopClassIsMemoryOnly) {
  const double B = 1.5e12, o = 2500;
  const calib::RooflineFit fit = fit_roofline(synthetic(0, B, o, false));
  EXPECT_EQ(fit.flops_per_s(), 0.0);
  EXPECT_NEAR(fit.bytes_per_s() / B, 1.0, 0.01);
  EXPECT_NEAR(fit.overhead_ns() / o, 1.0, 0.01);
}

TEST(FitRoofline, TolerantOfNoise) {
  const double F = 600e12, B = 2e12, o = 4000;
  calib::OpTable t = synthetic(F, B, o, true);
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> noise(0.97, 1.03);
  for (auto& p : *t.mutable_points()) p.set_time_ns(std::llround(static_cast<double>(p.time_ns()) * noise(rng)));
  const calib::RooflineFit fit = fit_roofline(t);
  EXPECT_NEAR(fit.flops_per_s() / F, 1.0, 0.05);
  EXPECT_NEAR(fit.bytes_per_s() / B, 1.0, 0.05);
  EXPECT_LT(fit.rms_relative_error(), 0.03);
  EXPECT_GT(fit.rms_relative_error(), 0.0);
}

TEST(FitRoofline, PredictionMatchesTheFormula) {
  calib::RooflineFit fit;
  fit.set_flops_per_s(1e12);
  fit.set_bytes_per_s(1e9);
  fit.set_overhead_ns(10);
  EXPECT_DOUBLE_EQ(roofline_time_ns(fit, 2e6, 1e3), 2e6 / 1e12 * 1e9 + 10);  // compute-bound
  EXPECT_DOUBLE_EQ(roofline_time_ns(fit, 1e3, 5e3), 5e3 / 1e9 * 1e9 + 10);   // memory-bound
  fit.set_flops_per_s(0);
  EXPECT_DOUBLE_EQ(roofline_time_ns(fit, 1e15, 5e3), 5e3 + 10);  // no compute bound
}

TEST(FitRoofline, EmptyTableIsAnError) { EXPECT_THROW(fit_roofline(calib::OpTable()), Error); }

std::vector<calib::CollectivePoint> collective_points(double alpha_ns, double busbw, double bf) {
  std::vector<calib::CollectivePoint> pts;
  for (int64_t bytes = 1 << 10; bytes <= (int64_t{1} << 32); bytes *= 4) {
    calib::CollectivePoint p;
    p.set_bytes(bytes);
    p.set_time_ns(std::llround(alpha_ns + static_cast<double>(bytes) * bf / busbw * 1e9));
    pts.push_back(p);
  }
  return pts;
}

TEST(FitCollective, RecoversLatencyAndBusBandwidth) {
  const double alpha = 12000, busbw = 370e9;
  const double bf = 2.0 * 7 / 8;
  const calib::CollectiveFit fit = fit_collective(ir::ALL_REDUCE, false, 8, calib::NVLINK, collective_points(alpha, busbw, bf));
  EXPECT_NEAR(fit.latency_ns() / alpha, 1.0, 0.01);
  EXPECT_NEAR(fit.bus_bandwidth_bytes_per_s() / busbw, 1.0, 0.01);
  EXPECT_EQ(fit.kind(), ir::ALL_REDUCE);
  EXPECT_EQ(fit.group_size(), 8);
  EXPECT_EQ(fit.link(), calib::NVLINK);
  ASSERT_EQ(fit.points_size(), 12);
  // nccl-tests' definitions: algbw = S / t, busbw = algbw × 2(n−1)/n.
  const auto& last = fit.points(11);
  EXPECT_DOUBLE_EQ(last.algbw_gb_per_s(), static_cast<double>(last.bytes()) / static_cast<double>(last.time_ns()));
  EXPECT_DOUBLE_EQ(last.busbw_gb_per_s(), last.algbw_gb_per_s() * bf);
}

TEST(FitCollective, SendReceiveAndAllGatherFactors) {
  EXPECT_DOUBLE_EQ(bus_factor(ir::COLLECTIVE_UNSPECIFIED, true, 2), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(ir::ALL_GATHER, false, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor(ir::REDUCE_SCATTER, false, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor(ir::ALL_TO_ALL, false, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor(ir::ALL_REDUCE, false, 4), 1.5);
  const calib::CollectiveFit p2p =
      fit_collective(ir::COLLECTIVE_UNSPECIFIED, true, 2, calib::NETWORK, collective_points(8000, 47.5e9, 1.0));
  EXPECT_NEAR(p2p.latency_ns() / 8000, 1.0, 0.01);
  EXPECT_NEAR(p2p.bus_bandwidth_bytes_per_s() / 47.5e9, 1.0, 0.01);
  EXPECT_TRUE(p2p.p2p());
}

TEST(FitCollective, LatencyIsNeverNegative) {
  // Times that fall below the bandwidth line at small sizes would give α < 0.
  std::vector<calib::CollectivePoint> pts = collective_points(0, 100e9, 1.0);
  pts[0].set_time_ns(1);
  const calib::CollectiveFit fit = fit_collective(ir::COLLECTIVE_UNSPECIFIED, true, 2, calib::NVLINK, pts);
  EXPECT_GE(fit.latency_ns(), 0.0);
  EXPECT_GT(fit.bus_bandwidth_bytes_per_s(), 0.0);
}

TEST(FitCollective, NeedsPointsAndAGroup) {
  EXPECT_THROW(fit_collective(ir::ALL_REDUCE, false, 8, calib::NVLINK, {}), Error);
  EXPECT_THROW(fit_collective(ir::ALL_REDUCE, false, 1, calib::NVLINK, collective_points(1, 1e9, 1)), Error);
}

}  // namespace
}  // namespace lacuna::calibration
