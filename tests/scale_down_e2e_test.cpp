// End-to-end: --scale-down on the commands that load a scenario, and the
// error for a compiled program (whose sizes are fixed).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "calib/shapes.h"
#include "sim/calibration/profile_io.h"
#include "sim/core/error.h"
#include "sim/proto/program.pb.h"
#include "sim/run/program_input.h"
#include "sim/core/option_text.h"
#include "tests/cli_test_util.h"
#include "tools/cli/scenario_shapes.h"

namespace lacuna::testing {
namespace {

const std::string kTiny = source_path("scenarios/cpu/tiny-mllm-cpu-8rank.pbtxt");

ir::Program read_program(const std::string& path) {
  ir::Program p;
  EXPECT_TRUE(p.ParseFromString(read_file(path))) << path;
  return p;
}

TEST(ScaleDownE2E, CompileWritesTheScaledProgramWithItsFactor) {
  TempDir dir("scale-compile");
  const auto plain = run_lacuna("compile " + kTiny + " -o " + (dir / "plain.pb"));
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  const auto half = run_lacuna("compile " + kTiny + " --scale-down 2 -o " + (dir / "half.pb"));
  ASSERT_EQ(half.exit_code, 0) << half.output;
  EXPECT_NE(half.output.find("scaled down 2x"), std::string::npos) << half.output;
  EXPECT_EQ(plain.output.find("scaled down"), std::string::npos) << plain.output;

  const ir::Program p = read_program(dir / "plain.pb");
  const ir::Program h = read_program(dir / "half.pb");
  EXPECT_EQ(p.info().scale_down(), 0);
  EXPECT_EQ(h.info().scale_down(), 2);
  EXPECT_EQ(h.info().scenario_name(), p.info().scenario_name());
  EXPECT_EQ(h.info().seq_length(), 64);
  EXPECT_EQ(h.ranks_size(), p.ranks_size());

  // The scaled program simulates: 8 samples of 64 tokens per iteration.
  const auto s = run_lacuna("simulate " + (dir / "half.pb") + " --no-trace --no-svg --out-dir " +
                            dir.path().string() + " --json " + (dir / "half.json"));
  ASSERT_EQ(s.exit_code, 0) << s.output;
  const auto j = nlohmann::json::parse(read_file(dir / "half.json"));
  EXPECT_NEAR(j["tokens_per_s"].get<double>() * j["iteration_time_s"].get<double>(), 8.0 * 64, 1e-6 * 8 * 64);
}

TEST(ScaleDownE2E, FactorOneIsByteIdentical) {
  TempDir dir("scale-one");
  ASSERT_EQ(run_lacuna("compile " + kTiny + " -o " + (dir / "a.pb")).exit_code, 0);
  ASSERT_EQ(run_lacuna("compile " + kTiny + " --scale-down 1 -o " + (dir / "b.pb")).exit_code, 0);
  EXPECT_EQ(read_file(dir / "a.pb"), read_file(dir / "b.pb"));
}

TEST(ScaleDownE2E, FactorsThatDoNotFitAreErrorsNamingTheField) {
  TempDir dir("scale-bad");
  auto r = run_lacuna("compile " + kTiny + " --scale-down 3 -o " + (dir / "p.pb"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("tiny-mllm-cpu-8rank.pbtxt:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("model.llm.hidden_size: --scale-down 3: hidden_size 256 is not divisible by 3"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("use --scale-down 32"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "p.pb"));

  for (const char* bad : {"0", "-2", "1.5", "x"}) {
    r = run_lacuna("compile " + kTiny + " --scale-down " + bad + " -o " + (dir / "p.pb"));
    EXPECT_NE(r.exit_code, 0) << bad << ": " << r.output;
    EXPECT_NE(r.output.find("--scale-down"), std::string::npos) << bad << ": " << r.output;
    EXPECT_FALSE(std::filesystem::exists(dir / "p.pb"));
  }
}

TEST(ScaleDownE2E, CompiledProgramInputCannotBeScaled) {
  TempDir dir("scale-pb");
  ASSERT_EQ(run_lacuna("compile " + kTiny + " -o " + (dir / "p.pb")).exit_code, 0);
  try {
    run::load_program_input(dir / "p.pb", nullptr, 2);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.where().file, dir / "p.pb");
    // Option references, spelled here as the CLI spells them.
    EXPECT_NE(spell_options(e.problem(), cli_option).find("--scale-down applies to scenarios"), std::string::npos)
        << e.what();
    EXPECT_NE(spell_options(e.fix(), cli_option).find("`lacuna compile` and --scale-down 2"), std::string::npos)
        << e.what();
  }
  // Factor 1 is no scaling: the program loads.
  EXPECT_EQ(run::load_program_input(dir / "p.pb", nullptr, 1).ranks_size(), 8);
  // A scenario input is scaled.
  EXPECT_EQ(run::load_program_input(kTiny, nullptr, 4).info().scale_down(), 4);
}

TEST(ScaleDownE2E, CompareRunsTheScaledScenario) {
  TempDir dir("scale-compare");
  const auto r = run_lacuna("compare " + kTiny + " --scale-down 2 --no-svg --json " + (dir / "c.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir / "c.json"));
}

TEST(ScaleDownE2E, CalibrateMeasuresTheScaledShapes) {
  TempDir dir("scale-calibrate");
  const std::string profile = dir / "p.pbtxt";
  const auto r = run_lacuna("calibrate --cpu --scenario " + kTiny + " --scale-down 4 --no-grid -o " + profile +
                            " --repetitions 1 --warmup 0 --max-point-seconds 0.02");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--scale-down 4"), std::string::npos) << r.output;
  const calib::CalibrationProfile p = calibration::read_profile(profile);
  // The profile's scenario reads as the arguments that re-measure it.
  EXPECT_EQ(p.scenario(), kTiny + " --scale-down 4");
  // Every measured shape (--no-grid: exact shapes only) is one the scaled
  // program runs, and some are not in the unscaled one.
  const calibrate::ShapeSet scaled = cli::extract_shapes_from_scenario(kTiny, 4);
  const calibrate::ShapeSet plain = cli::extract_shapes_from_scenario(kTiny);
  int measured = 0, only_scaled = 0;
  for (const auto& t : p.ops()) {
    for (const auto& m : t.points()) {
      const calibrate::KernelKey key{t.op_class(), t.variant(), {m.shape().begin(), m.shape().end()}};
      EXPECT_TRUE(scaled.contains(key)) << calibrate::describe(key);
      ++measured;
      only_scaled += plain.contains(key) ? 0 : 1;
    }
  }
  EXPECT_GT(measured, 0);
  EXPECT_GT(only_scaled, 0);
}

}  // namespace
}  // namespace lacuna::testing
