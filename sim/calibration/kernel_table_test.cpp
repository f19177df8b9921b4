#include "sim/calibration/kernel_table.h"

#include <algorithm>
#include <random>
#include <tuple>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/calibration/calibration_test_support.h"
#include "sim/calibration/fit.h"
#include "sim/core/error.h"

namespace lacuna::calibration {
namespace {

using ::testing::HasSubstr;
using namespace calibration::testing;

// GEMM [m, 4096, 4096] at m = 1024, 4096; LAYERNORM [tokens, 1024] at 2048.
calib::CalibrationProfile small_profile() {
  calib::CalibrationProfile p = gpu_profile();
  add_table(p, ir::GEMM, ir::VARIANT_FORWARD,
            {point({1024, 4096, 4096}, 100000, 3.4e10, 5e7), point({4096, 4096, 4096}, 350000, 1.37e11, 1e8),
             point({512, 1024, 1024}, 9000, 1.07e9, 4e6)});
  add_table(p, ir::LAYERNORM, ir::VARIANT_FORWARD, {point({2048, 1024}, 9000, 0, 8e6), point({8192, 1024}, 30000, 0, 3.2e7)});
  return p;
}

TEST(KernelTable, ExactHitReturnsTheMedian) {
  const KernelTable t(small_profile(), "p.pbtxt");
  const Lookup l = t.lookup(compute_op(ir::GEMM, ir::VARIANT_FORWARD, {4096, 4096, 4096}, 1, 1));
  EXPECT_EQ(l.kind, LookupKind::kExact);
  EXPECT_EQ(l.time, TimeNs(350000));
}

TEST(KernelTable, InterpolatesLogLinearlyInTheFirstDimension) {
  const KernelTable t(small_profile(), "p.pbtxt");
  // m = 2048 is the geometric midpoint of 1024 and 4096: the geometric mean of the times.
  const Lookup l = t.lookup(compute_op(ir::GEMM, ir::VARIANT_FORWARD, {2048, 4096, 4096}, 1, 1));
  EXPECT_EQ(l.kind, LookupKind::kInterpolated);
  EXPECT_EQ(l.time, TimeNs(std::llround(std::sqrt(100000.0 * 350000.0))));
}

TEST(KernelTable, PrecedenceExactThenInterpolatedThenExtrapolated) {
  calib::CalibrationProfile p = small_profile();
  const KernelTable t(p, "p.pbtxt");
  // Exact wins even where the fit would say otherwise.
  EXPECT_EQ(t.lookup(compute_op(ir::GEMM, ir::VARIANT_FORWARD, {1024, 4096, 4096}, 1e15, 1e15)).kind,
            LookupKind::kExact);
  // Inside the family's range: interpolated, whatever the op's FLOPs.
  EXPECT_EQ(t.lookup(compute_op(ir::GEMM, ir::VARIANT_FORWARD, {3000, 4096, 4096}, 1e15, 1e15)).kind,
            LookupKind::kInterpolated);
  // Above the family's range, or another family: the fit at the op's FLOPs and bytes.
  for (const auto& shape : {std::vector<int64_t>{8192, 4096, 4096}, std::vector<int64_t>{256, 4096, 4096},
                            std::vector<int64_t>{2048, 2048, 4096}, std::vector<int64_t>{2048, 4096, 4096, 2}}) {
    const ir::Compute op = compute_op(ir::GEMM, ir::VARIANT_FORWARD, shape, 2.7e11, 2e8);
    const Lookup l = t.lookup(op);
    EXPECT_EQ(l.kind, LookupKind::kExtrapolated) << shape[0];
    EXPECT_EQ(l.time, TimeNs(std::llround(roofline_time_ns(p.ops(0).fit(), op.flops(), op.bytes()))));
  }
}

TEST(KernelTable, ExtrapolationEqualsTheFit) {
  calib::CalibrationProfile p = small_profile();
  calib::RooflineFit& fit = *p.mutable_ops(1)->mutable_fit();
  fit.set_flops_per_s(0);
  fit.set_bytes_per_s(1e12);
  fit.set_overhead_ns(1500);
  const KernelTable t(p, "p.pbtxt");
  const Lookup l = t.lookup(compute_op(ir::LAYERNORM, ir::VARIANT_FORWARD, {100000, 1024}, 0, 1e9));
  EXPECT_EQ(l.kind, LookupKind::kExtrapolated);
  EXPECT_EQ(l.time, TimeNs(1000000 + 1500));  // 1 GB at 1 TB/s + overhead
}

// Absurd fits (issue 16's bad-input campaign) are refused naming the profile,
// never rounded to 0 ns.
TEST(KernelTable, AFitGivingDaysPerKernelIsAnError) {
  for (const auto& [flops_per_s, bytes_per_s, overhead_ns] :
       {std::tuple{1e-6, 0.0, 0.0}, std::tuple{0.0, 1e-300, 0.0}, std::tuple{0.0, 0.0, 1e30}}) {
    calib::CalibrationProfile p = small_profile();
    calib::RooflineFit& fit = *p.mutable_ops(1)->mutable_fit();
    fit.set_flops_per_s(flops_per_s);
    fit.set_bytes_per_s(bytes_per_s);
    fit.set_overhead_ns(overhead_ns);
    const KernelTable t(p, "p.pbtxt");
    try {
      t.lookup(compute_op(ir::LAYERNORM, ir::VARIANT_FORWARD, {100000, 1024}, 1e9, 1e9));
      ADD_FAILURE() << "accepted flops_per_s " << flops_per_s << " bytes_per_s " << bytes_per_s;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("p.pbtxt"));
      EXPECT_THAT(e.what(), HasSubstr("no kernel runs longer"));
    }
  }
}

TEST(KernelTable, VariantsAreSeparateTables) {
  const KernelTable t(small_profile(), "p.pbtxt");
  EXPECT_TRUE(t.has_table(ir::GEMM, ir::VARIANT_FORWARD));
  EXPECT_FALSE(t.has_table(ir::GEMM, ir::VARIANT_BACKWARD_WEIGHT));
}

TEST(KernelTable, MissingClassNamesClassVariantAndFile) {
  const KernelTable t(small_profile(), "prof/h100.pbtxt");
  try {
    t.lookup(compute_op(ir::ATTENTION, ir::VARIANT_BACKWARD_INPUT, {2, 16, 1024, 1024, 64, 1, 16}, 1, 1));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "prof/h100.pbtxt: the calibration profile has no kernel table for ATTENTION VARIANT_BACKWARD_INPUT, which "
              "the program runs (re-run `lacuna calibrate` with `scenario scenarios/llm/gpt-1.3b-8gpu.pbtxt`, the "
              "scenario you simulate, so that the profile measures its kernels)");
  }
  EXPECT_THROW(t.lookup(compute_op(ir::GEMM, ir::VARIANT_BACKWARD_WEIGHT, {1024, 4096, 4096})), Error);
  // The hint names the scenario being simulated when the caller knows it.
  const KernelTable named(small_profile(), "prof/h100.pbtxt", "my.pbtxt");
  try {
    named.lookup(compute_op(ir::GEMM, ir::VARIANT_BACKWARD_WEIGHT, {1024, 4096, 4096}));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("GEMM VARIANT_BACKWARD_WEIGHT"));
    EXPECT_THAT(std::string(e.what()), HasSubstr("(re-run `lacuna calibrate` with `scenario my.pbtxt`,"));
  }
}

// Property: over random grids with monotone times, the lookup is exact at
// every grid point and monotone (and bracketed by the neighbours) between them.
TEST(KernelTable, InterpolationIsExactAtGridPointsAndMonotoneBetween) {
  std::mt19937_64 rng(20240611);
  for (int trial = 0; trial < 60; ++trial) {
    std::uniform_int_distribution<int> count(2, 12);
    std::uniform_int_distribution<int64_t> step(1, 5000);
    std::uniform_int_distribution<int64_t> grow(0, 200000);
    const bool increasing = trial % 3 != 0;  // some decreasing grids too (monotone either way)
    std::vector<std::pair<int64_t, int64_t>> grid;
    int64_t s = std::uniform_int_distribution<int64_t>(1, 64)(rng);
    int64_t t = std::uniform_int_distribution<int64_t>(1, 1000000)(rng);
    const int n = count(rng);
    std::vector<int64_t> times;
    for (int i = 0; i < n; ++i) {
      grid.emplace_back(s, 0);
      times.push_back(t);
      s += step(rng);
      t += grow(rng);  // non-decreasing; equal neighbours allowed
    }
    if (!increasing) std::reverse(times.begin(), times.end());
    std::vector<calib::Measurement> pts;
    for (int i = 0; i < n; ++i) {
      grid[i].second = times[i];
      pts.push_back(point({grid[i].first, 128}, grid[i].second, 0, 1e6));
    }
    calib::CalibrationProfile p = gpu_profile();
    add_table(p, ir::RMSNORM, ir::VARIANT_FORWARD, pts);
    const KernelTable table(p, "p.pbtxt");
    auto at = [&](int64_t x) { return table.lookup(compute_op(ir::RMSNORM, ir::VARIANT_FORWARD, {x, 128}, 0, 1e6)); };
    for (const auto& [x, ns] : grid) {
      const Lookup l = at(x);
      ASSERT_EQ(l.kind, LookupKind::kExact);
      ASSERT_EQ(l.time.count(), ns);
    }
    for (size_t i = 0; i + 1 < grid.size(); ++i) {
      const auto [x0, t0] = grid[i];
      const auto [x1, t1] = grid[i + 1];
      int64_t prev = t0;
      // Many query points between neighbours (every one for short gaps).
      const int64_t stride = std::max<int64_t>(1, (x1 - x0) / 200);
      for (int64_t x = x0 + 1; x < x1; x += stride) {
        const Lookup l = at(x);
        ASSERT_EQ(l.kind, LookupKind::kInterpolated);
        const int64_t v = l.time.count();
        ASSERT_GE(v, std::min(t0, t1));
        ASSERT_LE(v, std::max(t0, t1));
        if (t1 >= t0) ASSERT_GE(v, prev) << "x " << x; else ASSERT_LE(v, prev) << "x " << x;
        prev = v;
      }
    }
  }
}

}  // namespace
}  // namespace lacuna::calibration
