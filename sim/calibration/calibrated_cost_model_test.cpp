#include "sim/calibration/calibrated_cost_model.h"

#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/calibration/calibration_test_support.h"
#include "sim/calibration/profile_io.h"
#include "sim/core/error.h"
#include "sim/cost/kernel_efficiency.h"
#include "sim/scenario/scenario.h"

namespace lacuna::calibration {
namespace {

using ::testing::HasSubstr;
using namespace calibration::testing;

scenario::Cluster h100_cluster(int nodes = 2) {
  scenario::Cluster c = scenario::hardware_preset("h100-sxm");
  c.set_num_nodes(nodes);
  return c;
}

std::unique_ptr<const cost::CostModel> analytic(const scenario::Cluster& c) {
  return cost::make_analytic_cost_model(c, scenario::BF16);
}

calib::CalibrationProfile profile_with_allreduce() {
  calib::CalibrationProfile p = gpu_profile();
  add_table(p, ir::GEMM, ir::VARIANT_FORWARD, {point({1024, 1024, 1024}, 20000, 2.1e9, 6e6)});
  calib::CollectiveFit* f = p.add_collectives();
  f->set_kind(ir::ALL_REDUCE);
  f->set_group_size(8);
  f->set_link(calib::NVLINK);
  f->set_latency_ns(10000);
  f->set_bus_bandwidth_bytes_per_s(350e9);
  calib::CollectiveFit* s = p.add_collectives();
  s->set_p2p(true);
  s->set_group_size(2);
  s->set_link(calib::NETWORK);
  s->set_latency_ns(5000);
  s->set_bus_bandwidth_bytes_per_s(40e9);
  return p;
}

TEST(CalibratedCostModel, KernelsFromTheProfile) {
  const auto cluster = h100_cluster();
  const CalibratedCostModel m(profile_with_allreduce(), "h100.pbtxt", cluster, analytic(cluster), false);
  EXPECT_EQ(m.compute(compute_op(ir::GEMM, ir::VARIANT_FORWARD, {1024, 1024, 1024}, 2.1e9, 6e6)), TimeNs(20000));
  EXPECT_EQ(m.name(),
            "calibrated: NVIDIA H100 80GB HBM3 profile h100.pbtxt (kernels), measured collectives where the profile "
            "has a fit, analytic otherwise");
  EXPECT_TRUE(m.device_matches());
}

TEST(CalibratedCostModel, CollectivesFromMatchingFitsElseTheBase) {
  const auto cluster = h100_cluster();
  const auto base = analytic(cluster);
  const CalibratedCostModel m(profile_with_allreduce(), "h100.pbtxt", cluster, analytic(cluster), false);
  const int64_t bytes = int64_t{1} << 30;
  // In-node group of 8: the NVLINK all-reduce fit.
  const cost::GroupShape node{8, 1, 8};
  EXPECT_EQ(m.collective(ir::ALL_REDUCE, bytes, node),
            TimeNs(std::llround(10000 + static_cast<double>(bytes) * 2 * 7 / 8 / 350e9 * 1e9)));
  // Same size across nodes (NETWORK), another size or another kind: the analytic model.
  const cost::GroupShape spread{8, 2, 4};
  EXPECT_EQ(m.collective(ir::ALL_REDUCE, bytes, spread), base->collective(ir::ALL_REDUCE, bytes, spread));
  const cost::GroupShape four{4, 1, 4};
  EXPECT_EQ(m.collective(ir::ALL_REDUCE, bytes, four), base->collective(ir::ALL_REDUCE, bytes, four));
  EXPECT_EQ(m.collective(ir::ALL_GATHER, bytes, node), base->collective(ir::ALL_GATHER, bytes, node));
  EXPECT_EQ(m.collective(ir::ALL_REDUCE, 0, node), TimeNs::zero());
  // Transfers: across nodes from the fit, inside a node from the base.
  EXPECT_EQ(m.p2p(bytes, false), TimeNs(std::llround(5000 + static_cast<double>(bytes) / 40e9 * 1e9)));
  EXPECT_EQ(m.p2p(bytes, true), base->p2p(bytes, true));
}

TEST(CalibratedCostModel, CpuProfileUsesSharedMemoryFits) {
  calib::CalibrationProfile p = gpu_profile("Intel(R) Xeon(R) Platinum 8480+");
  p.mutable_device()->set_kind(calib::DeviceInfo::CPU);
  p.set_precision(scenario::FP32);
  add_table(p, ir::GEMM, ir::VARIANT_FORWARD, {point({64, 64, 64}, 40000, 5.2e5, 5e4)});
  calib::CollectiveFit* f = p.add_collectives();
  f->set_kind(ir::ALL_REDUCE);
  f->set_group_size(8);
  f->set_link(calib::SHARED_MEMORY);
  f->set_latency_ns(2000);
  f->set_bus_bandwidth_bytes_per_s(10e9);
  scenario::Cluster cluster = h100_cluster(1);
  cluster.mutable_gpu()->set_name("CPU");
  const CalibratedCostModel m(p, "cpu.pbtxt", cluster, analytic(cluster), false);
  EXPECT_EQ(m.collective(ir::ALL_REDUCE, 1000, cost::GroupShape{8, 1, 8}), TimeNs(2000 + 175));
}

TEST(CalibratedCostModel, DeviceMismatchIsAnErrorUnlessAllowed) {
  const auto cluster = scenario::hardware_preset("a100-80gb-sxm");
  try {
    CalibratedCostModel m(profile_with_allreduce(), "h100.pbtxt", cluster, analytic(cluster), false);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "h100.pbtxt: device.name: the profile was measured on \"NVIDIA H100 80GB HBM3\", but the scenario's GPU "
              "(cluster.gpu.name) is \"NVIDIA A100-SXM4-80GB\" (calibrate on the scenario's GPU, or pass "
              "`allow-device-mismatch` to use these times anyway)");
  }
  const CalibratedCostModel m(profile_with_allreduce(), "h100.pbtxt", cluster, analytic(cluster), true);
  EXPECT_FALSE(m.device_matches());
  EXPECT_THAT(std::string(m.name()), HasSubstr("[device mismatch allowed: scenario GPU \"NVIDIA A100-SXM4-80GB\"]"));
  EXPECT_EQ(m.compute(compute_op(ir::GEMM, ir::VARIANT_FORWARD, {1024, 1024, 1024}, 2.1e9, 6e6)), TimeNs(20000));
}

TEST(CalibratedCostModel, DeviceNamesCompareCaseInsensitively) {
  scenario::Cluster cluster = h100_cluster();
  cluster.mutable_gpu()->set_name("nvidia h100 80gb hbm3");
  EXPECT_TRUE(check_device(profile_with_allreduce(), "p", cluster, false));
  calib::CalibrationProfile cpu = profile_with_allreduce();
  cpu.mutable_device()->set_kind(calib::DeviceInfo::CPU);
  EXPECT_THAT([&] { check_device(cpu, "p", cluster, false); }, ::testing::Throws<Error>());
  cluster.mutable_gpu()->set_name("cpu");
  EXPECT_TRUE(check_device(cpu, "p", cluster, false));
}

TEST(CalibratedCostModel, PrecisionMismatchIsAnErrorUnlessAllowed) {
  const calib::CalibrationProfile bf16 = profile_with_allreduce();  // measured in BF16
  EXPECT_TRUE(check_precision(bf16, "p.pbtxt", scenario::BF16, false));
  try {
    check_precision(bf16, "p.pbtxt", scenario::FP8, false);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "p.pbtxt: precision: the profile's kernels were measured in BF16, but the scenario trains in FP8 "
              "(training.precision) (calibrate at the scenario's precision, or pass `allow-device-mismatch` to "
              "use these times anyway)");
  }
  EXPECT_FALSE(check_precision(bf16, "p.pbtxt", scenario::FP8, true));
}

TEST(CalibratedCostModel, FactoryReadsTheFile) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("lacuna-ccm-" + std::to_string(::getpid()) + ".pbtxt")).string();
  write_profile(profile_with_allreduce(), path);
  const auto cluster = h100_cluster();
  const auto m = make_calibrated_cost_model(path, cluster, analytic(cluster), false);
  EXPECT_EQ(m->profile_path(), path);
  EXPECT_EQ(m->profile().collectives_size(), 2);
  std::filesystem::remove(path);
}

// Unmeasured GEMM shapes fall back to a roofline refitted to the rate of a
// perfect shape, slowed by their own shape factor (docs/cost-model.md
// #per-shape-efficiency): the measured GEMMs below run at R / factor + 5 µs,
// and an unmeasured, badly tiled shape is predicted at its own factor.
TEST(CalibratedCostModel, ExtrapolationKeepsTheShapeModel) {
  const auto cluster = h100_cluster();
  const cost::KernelEfficiency shapes(cluster.gpu().shape_model(), cluster.gpu().num_sms());
  const double rate = 700e12, overhead_ns = 5000;
  auto flops = [](int64_t m, int64_t n, int64_t k) { return 2.0 * m * n * k; };
  auto bytes = [](int64_t m, int64_t n, int64_t k) { return 2.0 * (m * k + k * n + m * n); };
  auto ns = [&](int64_t m, int64_t n, int64_t k) {
    return flops(m, n, k) / (rate * shapes.gemm(m, n, k).factor) * 1e9 + overhead_ns;
  };
  std::vector<calib::Measurement> points;
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{8192, 8192, 8192},
                         {4096, 12288, 4096},
                         {2048, 6144, 1024},
                         {16384, 3072, 12288}}) {
    points.push_back(point({m, n, k}, std::llround(ns(m, n, k)), flops(m, n, k), bytes(m, n, k)));
  }
  calib::CalibrationProfile p = gpu_profile();
  add_table(p, ir::GEMM, ir::VARIANT_FORWARD, points);

  // An attention-projection GEMM of a 8192-hidden layer at TP 8: K = 1024,
  // a family (n, k) the profile never measured.
  const int64_t m = 8192, n = 8192, k = 1024;
  const ir::Compute query = compute_op(ir::GEMM, ir::VARIANT_FORWARD, {m, n, k}, flops(m, n, k), bytes(m, n, k));
  const CalibratedCostModel shaped(p, "h100.pbtxt", cluster, analytic(cluster), false);
  EXPECT_EQ(shaped.kernels().lookup(query).kind, LookupKind::kExtrapolated);
  EXPECT_NEAR(static_cast<double>(shaped.compute(query).count()), ns(m, n, k), 0.01 * ns(m, n, k));
  // Measured shapes are still their measurements.
  EXPECT_EQ(shaped.compute(compute_op(ir::GEMM, ir::VARIANT_FORWARD, {8192, 8192, 8192})),
            TimeNs(std::llround(ns(8192, 8192, 8192))));

  // `flat: true`: the stored fit, without shape terms, as before per-shape efficiency.
  scenario::Cluster flat = cluster;
  flat.mutable_gpu()->mutable_shape_model()->set_flat(true);
  const CalibratedCostModel plain(p, "h100.pbtxt", flat, analytic(flat), false);
  EXPECT_EQ(plain.compute(query), TimeNs(std::llround(roofline_time_ns(p.ops(0).fit(), flops(m, n, k), bytes(m, n, k)))));
  EXPECT_LT(plain.compute(query), shaped.compute(query)) << "K = 1024 is slower than the measured long-K GEMMs";
}

}  // namespace
}  // namespace lacuna::calibration
