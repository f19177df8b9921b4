// Per-op precision in the roofline (docs/fp8.md#cost): an FP8 program is BF16
// training; only ops tagged FP8 run at the FP8 peak.
#include <gtest/gtest.h>

#include "sim/core/error.h"
#include "sim/cost/roofline.h"
#include "sim/cost/test_clusters.h"

namespace lacuna::cost {
namespace {

using testing::dgx_a100;
using testing::hgx_hopper;

ir::Compute gemm(double flops, double bytes, scenario::Precision p = scenario::PRECISION_UNSPECIFIED) {
  ir::Compute c;
  c.set_op_class(ir::GEMM);
  c.set_flops(flops);
  c.set_bytes(bytes);
  if (p != scenario::PRECISION_UNSPECIFIED) c.set_precision(p);
  return c;
}

constexpr double kFlops = 2.0 * 8192 * 8192 * 8192;
constexpr double kBytes = 3.0 * 8192 * 8192;

TEST(RooflineFp8, ProgramFp8MeansABf16BaseAndFp8OpsAtTheFp8Peak) {
  const auto gpu = hgx_hopper(1).gpu();
  const RooflineModel bf16(gpu, scenario::BF16), fp8(gpu, scenario::FP8);
  const double eff = gpu.efficiency().at("GEMM").flops();
  // Untagged ops of an FP8 program: exactly the BF16 program's times.
  EXPECT_EQ(fp8.time(gemm(kFlops, kBytes)), bf16.time(gemm(kFlops, kBytes)));
  // Tagged FP8: FLOPs over the FP8 peak at the class's efficiency.
  const double overhead = gpu.kernel_overhead_us() * 1e-6;
  EXPECT_EQ(fp8.time(gemm(kFlops, kBytes, scenario::FP8)),
            TimeNs::from_seconds(kFlops / (gpu.peak_fp8_tflops() * 1e12 * eff) + overhead));
  // A BF16 program may carry FP8-tagged ops too (the peak is the op's).
  EXPECT_EQ(bf16.time(gemm(kFlops, kBytes, scenario::FP8)), fp8.time(gemm(kFlops, kBytes, scenario::FP8)));
  // Memory-bound ops are unaffected by the tag.
  EXPECT_EQ(fp8.time(gemm(1, 1e9, scenario::FP8)), fp8.time(gemm(1, 1e9)));
}

TEST(RooflineFp8, AnFp8OpOnAGpuWithoutFp8IsAnError) {
  const RooflineModel m(dgx_a100(1).gpu(), scenario::BF16);
  EXPECT_THROW((void)m.time(gemm(kFlops, kBytes, scenario::FP8)), Error);
  EXPECT_THROW(RooflineModel(dgx_a100(1).gpu(), scenario::FP8), Error);
}

TEST(RooflineFp8, BaseOfEachProgramPrecision) {
  EXPECT_EQ(base_precision(scenario::FP8), scenario::BF16);
  EXPECT_EQ(base_precision(scenario::BF16), scenario::BF16);
  EXPECT_EQ(base_precision(scenario::FP16), scenario::FP16);
  EXPECT_EQ(base_precision(scenario::FP32), scenario::FP32);
}

}  // namespace
}  // namespace lacuna::cost
