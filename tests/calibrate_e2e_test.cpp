// End-to-end: `lacuna calibrate --cpu` on the shipped CPU scenario writes a
// profile that reads back and that `lacuna simulate --calibration` uses.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "calib/shapes.h"
#include "sim/calibration/profile_io.h"
#include "tests/cli_test_util.h"
#include "tools/cli/scenario_shapes.h"

namespace lacuna::testing {
namespace {

const std::string kCpuScenario = source_path("scenarios/cpu/tiny-mllm-cpu-8rank.pbtxt");

TEST(CalibrateE2E, CpuProfileOfTheCpuScenarioReadsBackAndSimulates) {
  TempDir dir("calibrate");
  const std::string profile = dir / "profile.pbtxt";
  // A small --max-point-seconds keeps this quick on 2 cores; the grid's large
  // points are then skipped (and extrapolated by the simulator).
  const auto r = run_lacuna("calibrate --cpu --scenario " + kCpuScenario + " -o " + profile +
                            " --repetitions 3 --warmup 1 --max-point-seconds 0.02");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("plan:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("exact shapes"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("profile written to " + profile), std::string::npos) << r.output;
  ASSERT_TRUE(std::filesystem::exists(profile));

  const calib::CalibrationProfile p = calibration::read_profile(profile);
  EXPECT_EQ(p.device().kind(), calib::DeviceInfo::CPU);
  EXPECT_FALSE(p.device().name().empty());
  EXPECT_EQ(p.precision(), scenario::FP32);
  EXPECT_EQ(p.collectives_size(), 0);  // not measured on the CPU
  std::set<std::pair<int, int>> tables;
  for (const auto& t : p.ops()) {
    tables.insert({t.op_class(), t.variant()});
    EXPECT_GT(t.points_size(), 0);
    for (const auto& m : t.points()) {
      EXPECT_GT(m.time_ns(), 0);
      EXPECT_GT(m.min_ns(), 0);
      EXPECT_LE(m.min_ns(), m.time_ns());
      EXPECT_LE(m.time_ns(), m.max_ns());
      EXPECT_EQ(m.repetitions(), 3);
    }
  }
  // A table for every (class, variant) the scenario's program runs.
  for (const auto& [key, use] : cli::extract_shapes_from_scenario(kCpuScenario)) {
    EXPECT_TRUE(tables.count({key.op_class, key.variant})) << calibrate::describe(key);
  }

  const auto s = run_lacuna("simulate " + kCpuScenario + " --calibration " + profile + " --out-dir " +
                            dir.path().string() + " --no-trace --no-svg");
  ASSERT_EQ(s.exit_code, 0) << s.output;
  EXPECT_NE(s.output.find("calibration"), std::string::npos) << s.output;
  EXPECT_NE(s.output.find("exact"), std::string::npos) << s.output;  // the coverage line
}

// The profile shipped in calib/profiles/ still reads (schema drift would
// break it) and times every kernel of the CPU scenario from a measurement.
TEST(CalibrateE2E, ShippedCpuProfileCoversTheCpuScenarioExactly) {
  const std::string shipped = source_path("calib/profiles/cpu-epyc-2core-tiny-mllm.pbtxt");
  const calib::CalibrationProfile p = calibration::read_profile(shipped);
  EXPECT_EQ(p.device().kind(), calib::DeviceInfo::CPU);
  EXPECT_EQ(p.precision(), scenario::FP32);
  TempDir dir("calibrate-shipped");
  const std::string json = dir / "summary.json";
  const auto s = run_lacuna("simulate " + kCpuScenario + " --calibration " + shipped + " --json " + json +
                            " --no-trace --no-svg");
  ASSERT_EQ(s.exit_code, 0) << s.output;
  EXPECT_NE(s.output.find("exact 100.0 % of kernel time"), std::string::npos) << s.output;
  EXPECT_NE(s.output.find("interpolated 0.0 % (0), extrapolated 0.0 % (0)"), std::string::npos) << s.output;
  EXPECT_NE(s.output.find("calibrated kernels: " + p.device().name()), std::string::npos) << s.output;
}

// The H100 profile measured on a real GPU (calib/profiles/README.md) still
// reads and times every kernel of GPT-1.3B from a measurement. Its golden
// iteration time, 1.492 s, is the prediction that an executed rank on the same
// H100 matched within 0.41 % (docs/calibration.md#4).
TEST(CalibrateE2E, ShippedH100ProfileCoversGpt13bExactly) {
  const std::string shipped = source_path("calib/profiles/h100-gpt1.3b-lacuna-kernels.pbtxt");
  const calib::CalibrationProfile p = calibration::read_profile(shipped);
  EXPECT_EQ(p.device().kind(), calib::DeviceInfo::GPU);
  EXPECT_EQ(p.device().name(), "NVIDIA H100 80GB HBM3");
  const auto s = run_lacuna("simulate " + source_path("scenarios/llm/gpt-1.3b-8gpu.pbtxt") + " --calibration " +
                            shipped + " --no-trace --no-svg");
  ASSERT_EQ(s.exit_code, 0) << s.output;
  EXPECT_NE(s.output.find("iteration time           1.492 s"), std::string::npos) << s.output;
  EXPECT_NE(s.output.find("exact 100.0 % of kernel time (41 kernels)"), std::string::npos) << s.output;
}

TEST(CalibrateE2E, FailuresLeaveNoProfile) {
  TempDir dir("calibrate-fail");
  const std::string profile = dir / "profile.pbtxt";
  const auto r = run_lacuna("calibrate --cpu --scenario " + dir / "missing.pbtxt" + " -o " + profile);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_FALSE(std::filesystem::exists(profile));
  const auto bad = run_lacuna("calibrate --cpu --only NOT_A_CLASS -o " + profile);
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("unknown op class"), std::string::npos) << bad.output;
  EXPECT_FALSE(std::filesystem::exists(profile));
}

TEST(CalibrateE2E, GpuWithoutAGpuIsAClearError) {
  TempDir dir("calibrate-gpu");
  const auto r = run_lacuna("calibrate --gpu --scenario " + kCpuScenario + " -o " + (dir / "p.pbtxt"));
  if (r.exit_code == 0) GTEST_SKIP() << "this machine has a GPU";
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--gpu"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "p.pbtxt"));
}

}  // namespace
}  // namespace lacuna::testing
