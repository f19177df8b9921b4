#include "sim/calibration/coverage.h"

#include <gtest/gtest.h>

#include "sim/calibration/calibration_test_support.h"
#include "sim/core/error.h"

namespace lacuna::calibration {
namespace {

using namespace calibration::testing;

void add_compute(ir::Stream& s, const ir::Compute& c) { *s.add_ops()->mutable_compute() = c; }

// Two rank classes: class 0 bound to 3 ranks, class 1 to 1 rank.
ir::Program hand_made_program() {
  ir::Program p;
  ir::Stream& a = *p.add_classes()->add_streams();
  add_compute(a, compute_op(ir::GEMM, ir::VARIANT_FORWARD, {1024, 1024, 1024}, 1, 1));  // exact: 1000
  add_compute(a, compute_op(ir::GEMM, ir::VARIANT_FORWARD, {1024, 1024, 1024}, 1, 1));  // same kernel again
  add_compute(a, compute_op(ir::GEMM, ir::VARIANT_FORWARD, {2048, 1024, 1024}, 1, 1));  // interpolated: 2000
  ir::Compute fixed = compute_op(ir::ATTENTION, ir::VARIANT_FORWARD, {1});               // fixed: not asked
  fixed.set_fixed_duration_ns(777);
  add_compute(a, fixed);
  ir::Stream& b = *p.add_classes()->add_streams();
  add_compute(b, compute_op(ir::GEMM, ir::VARIANT_FORWARD, {1024, 1024, 1024}, 1, 1));  // exact again
  add_compute(b, compute_op(ir::LAYERNORM, ir::VARIANT_FORWARD, {99, 8}, 0, 5000));     // extrapolated: 5000 + 100
  b.add_ops()->mutable_collective()->set_bytes(10);                                     // not compute
  for (int r = 0; r < 4; ++r) p.add_ranks()->set_class_id(r < 3 ? 0 : 1);
  return p;
}

calib::CalibrationProfile coverage_profile() {
  calib::CalibrationProfile prof = gpu_profile();
  add_table(prof, ir::GEMM, ir::VARIANT_FORWARD,
            {point({1024, 1024, 1024}, 1000, 1, 1), point({4096, 1024, 1024}, 4000, 1, 1)});
  auto& ln = add_table(prof, ir::LAYERNORM, ir::VARIANT_FORWARD, {point({16, 16}, 300, 0, 300)});
  ln.mutable_fit()->set_flops_per_s(0);
  ln.mutable_fit()->set_bytes_per_s(1e9);  // 1 byte/ns
  ln.mutable_fit()->set_overhead_ns(100);
  return prof;
}

TEST(Coverage, CountsDistinctKernelsAndWeightsTimeByRanks) {
  const KernelTable table(coverage_profile(), "p.pbtxt");
  const Coverage c = kernel_coverage(hand_made_program(), table);
  using K = LookupKind;
  EXPECT_EQ(c.total[K::kExact], (CoverageShare{1, 2 * 1000 * 3 + 1000 * 1}));
  EXPECT_EQ(c.total[K::kInterpolated], (CoverageShare{1, 2000 * 3}));
  EXPECT_EQ(c.total[K::kExtrapolated], (CoverageShare{1, 5100}));
  EXPECT_EQ(c.total.kernels(), 3);
  EXPECT_EQ(c.total.time_ns(), 7000 + 6000 + 5100);
  ASSERT_EQ(c.by_class.size(), 2u);
  EXPECT_EQ(c.by_class.at(ir::GEMM).time_ns(), 13000);
  EXPECT_EQ(c.by_class.at(ir::GEMM)[K::kExtrapolated].kernels, 0);
  EXPECT_EQ(c.by_class.at(ir::LAYERNORM)[K::kExtrapolated], (CoverageShare{1, 5100}));
}

TEST(Coverage, UnboundClassesDoNotCount) {
  ir::Program p = hand_made_program();
  for (auto& r : *p.mutable_ranks()) r.set_class_id(0);
  const Coverage c = kernel_coverage(p, KernelTable(coverage_profile(), "p.pbtxt"));
  EXPECT_EQ(c.by_class.count(ir::LAYERNORM), 0u);
  EXPECT_EQ(c.total.time_ns(), (2 * 1000 + 2000) * 4);
}

TEST(Coverage, MissingTableFailsBeforeAnyRun) {
  calib::CalibrationProfile prof = gpu_profile();
  add_table(prof, ir::GEMM, ir::VARIANT_FORWARD, {point({1024, 1024, 1024}, 1000, 1, 1)});
  EXPECT_THROW(kernel_coverage(hand_made_program(), KernelTable(prof, "p.pbtxt")), Error);
}

}  // namespace
}  // namespace lacuna::calibration
