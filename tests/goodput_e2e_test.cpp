// End-to-end: lacuna goodput (docs/goodput.md).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli_test_util.h"

namespace lacuna::testing {
namespace {

nlohmann::json goodput_json(const TempDir& dir, const std::string& args, const std::string& tag) {
  const std::string json = dir / (tag + ".json");
  const auto r = run_lacuna("goodput " + source_path("scenarios/llm/gpt-1.3b-8gpu.pbtxt") + " " + args +
                            " --json " + json);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return r.exit_code == 0 ? nlohmann::json::parse(read_file(json)) : nlohmann::json();
}

// Without failures and checkpoints the run is its iterations, exactly: the
// wall time is the tokens over the simulated tokens per second.
TEST(GoodputE2E, WithoutFailuresTheRunIsItsIterations) {
  TempDir dir("goodput-none");
  const nlohmann::json probe = goodput_json(dir, "--tokens 1e6 --no-failures --runs 2", "probe");
  ASSERT_FALSE(probe.is_null());
  const int64_t per_iteration = probe["tokens_per_iteration"].get<int64_t>();
  ASSERT_GT(per_iteration, 0);
  const int64_t iterations = 1000;
  const nlohmann::json j = goodput_json(
      dir, "--tokens " + std::to_string(iterations * per_iteration) + " --no-failures --runs 3", "none");
  ASSERT_FALSE(j.is_null());
  EXPECT_EQ(j["iterations"].get<int64_t>(), iterations);
  const double seconds = static_cast<double>(iterations) * j["iteration_time_ns"].get<double>() * 1e-9;
  EXPECT_DOUBLE_EQ(j["work_s"].get<double>(), seconds);
  EXPECT_DOUBLE_EQ(j["wall_s"]["mean"].get<double>(), seconds);
  EXPECT_EQ(j["ettr"]["mean"].get<double>(), 1.0);
  EXPECT_EQ(j["failures_per_run"].get<double>(), 0.0);
  EXPECT_TRUE(j["mtbf_s"].is_null());
  EXPECT_TRUE(j["components"].empty());
}

// With the default rates: failures happen, the ETTR is below one, the lost
// time adds up, and the same seed gives the same file byte for byte.
TEST(GoodputE2E, FailuresCostTimeAndTheResultIsSeeded) {
  TempDir dir("goodput-default");
  // 8 GPUs fail rarely: train long enough for a few failures per run.
  const std::string args = "--tokens 2e13 --runs 300 --save-s 2";
  const nlohmann::json j = goodput_json(dir, args, "a");
  ASSERT_FALSE(j.is_null());
  EXPECT_GT(j["failures_per_run"].get<double>(), 1.0);
  EXPECT_LT(j["ettr"]["mean"].get<double>(), 1.0);
  EXPECT_GT(j["ettr"]["mean"].get<double>(), 0.5);
  EXPECT_EQ(j["components"].size(), 7u);
  double lost = 0;
  for (const auto& [name, value] : j["lost_by_phase"].items()) lost += value.get<double>();
  EXPECT_NEAR(j["work_s"].get<double>() + lost, j["wall_s"]["mean"].get<double>(),
              1e-6 * j["wall_s"]["mean"].get<double>());
  EXPECT_DOUBLE_EQ(j["checkpoint"]["interval_s"].get<double>(), j["checkpoint"]["daly_interval_s"].get<double>());
  goodput_json(dir, args, "b");
  EXPECT_EQ(read_file(dir / "a.json"), read_file(dir / "b.json"));
}

TEST(GoodputE2E, BadOptionsAreRefused) {
  TempDir dir("goodput-bad");
  const std::string scenario = source_path("scenarios/llm/gpt-1.3b-8gpu.pbtxt");
  const auto zero = run_lacuna("goodput " + scenario + " --tokens 0");
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_NE(zero.output.find("positive, finite number of tokens"), std::string::npos) << zero.output;
  EXPECT_NE(zero.output.find("--tokens"), std::string::npos) << zero.output;
  const auto interval = run_lacuna("goodput " + scenario + " --tokens 1e9 --checkpoint-interval soon");
  EXPECT_EQ(interval.exit_code, 2);
  EXPECT_NE(interval.output.find("--checkpoint-interval"), std::string::npos) << interval.output;
  // What would not end: too many runs, or a run too long for its failures.
  const auto runs = run_lacuna("goodput " + scenario + " --tokens 1e9 --runs 2000000000");
  EXPECT_EQ(runs.exit_code, 2) << runs.output;
  EXPECT_NE(runs.output.find("1,000,000 runs"), std::string::npos) << runs.output;
  const auto tokens = run_lacuna("goodput " + scenario + " --tokens 1e30");
  EXPECT_EQ(tokens.exit_code, 2) << tokens.output;
  EXPECT_NE(tokens.output.find("10^15"), std::string::npos) << tokens.output;
  const auto failures = run_lacuna("goodput " + scenario + " --tokens 1e19");
  EXPECT_EQ(failures.exit_code, 2) << failures.output;
  EXPECT_NE(failures.output.find("failures"), std::string::npos) << failures.output;
  const auto save = run_lacuna("goodput " + scenario + " --tokens 1e9 --save-s nan --json " + (dir / "x.json"));
  EXPECT_EQ(save.exit_code, 2) << save.output;
  EXPECT_NE(save.output.find("--save-s"), std::string::npos) << save.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "x.json"));
}


// The scenario's reliability section (here through --set, which edits the
// file's fields): rates of zero leave no failure; its interval and save are
// used; an unknown kind or an out-of-range rate is refused naming the field.
TEST(GoodputE2E, TheReliabilitySectionOverridesTheDefaults) {
  TempDir dir("goodput-reliability");
  std::string zero;
  for (const char* kind : {"gpu", "hbm", "nic", "network", "host", "software", "other"})
    zero += std::string(" --set reliability.components[") + kind + "].rate_per_hour=0";
  const nlohmann::json none = goodput_json(dir, "--tokens 2e13 --runs 20" + zero, "zero");
  ASSERT_FALSE(none.is_null());
  EXPECT_EQ(none["failures_per_run"].get<double>(), 0.0);
  EXPECT_EQ(none["ettr"]["mean"].get<double>(), 1.0);
  const nlohmann::json set = goodput_json(
      dir, "--tokens 2e13 --runs 20 --set reliability.checkpoint_interval_s=600 --set reliability.save_blocking_s=3",
      "set");
  ASSERT_FALSE(set.is_null());
  EXPECT_EQ(set["checkpoint"]["interval_s"].get<double>(), 600.0);
  EXPECT_EQ(set["checkpoint"]["save_blocking_s"].get<double>(), 3.0);
  // An option overrides the section.
  const nlohmann::json flag = goodput_json(
      dir, "--tokens 2e13 --runs 20 --set reliability.checkpoint_interval_s=600 --checkpoint-interval 900", "flag");
  ASSERT_FALSE(flag.is_null());
  EXPECT_EQ(flag["checkpoint"]["interval_s"].get<double>(), 900.0);
  const std::string scenario = source_path("scenarios/llm/gpt-1.3b-8gpu.pbtxt");
  const auto unknown = run_lacuna("goodput " + scenario + " --tokens 1e9 --set reliability.components[tpu].rate_per_hour=1");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.output.find("reliability.components[tpu]: unknown component kind \"tpu\""), std::string::npos)
      << unknown.output;
  const auto high = run_lacuna("goodput " + scenario + " --tokens 1e9 --set reliability.components[gpu].rate_per_hour=5");
  EXPECT_EQ(high.exit_code, 2);
  EXPECT_NE(high.output.find("rate_per_hour: 5 is above the supported maximum 1"), std::string::npos) << high.output;
}

}  // namespace
}  // namespace lacuna::testing
