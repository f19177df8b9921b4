// End-to-end: `lacuna simulate --iterations N --samples K --seed S -j N`.
#include <gtest/gtest.h>

#include <set>

#include <nlohmann/json.hpp>

#include "tests/cli_test_util.h"

namespace lacuna::testing {
namespace {

const std::string kSmall = source_path("scenarios/llm/gpt-1.3b-8gpu.pbtxt");
const std::string kGpt3 = source_path("scenarios/llm/gpt3-175b-3072.pbtxt");

CommandResult simulate(const std::string& input, const std::string& extra, const TempDir& dir) {
  return run_lacuna("simulate " + input + " --json " + (dir / "s.json") + " --trace " + (dir / "s.trace.json") +
                    " --svg " + (dir / "s.svg") + " " + extra);
}

TEST(IterationsE2E, OneIterationIsTheDefaultByteForByte) {
  TempDir a("it1-a"), b("it1-b");
  ASSERT_EQ(simulate(kSmall, "", a).exit_code, 0);
  const auto r = simulate(kSmall, "--iterations 1", b);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* f : {"s.json", "s.trace.json", "s.svg"}) EXPECT_EQ(read_file(a / f), read_file(b / f)) << f;
  EXPECT_EQ(r.output.find("steady-state"), std::string::npos);
}

TEST(IterationsE2E, SeveralIterationsReportEachAndTheSteadyStateMean) {
  TempDir one("it-one"), four("it-four");
  ASSERT_EQ(simulate(kGpt3, "--ideal --fold --network analytic", one).exit_code, 0);
  const auto r = simulate(kGpt3, "--ideal --fold --network analytic --iterations 4", four);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("(steady-state mean of iterations 1–3)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("  iterations               4: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("per iteration, over the run: run time"), std::string::npos) << r.output;
  const auto a = nlohmann::json::parse(read_file(one / "s.json"));
  const auto j = nlohmann::json::parse(read_file(four / "s.json"));
  const auto& it = j["iterations"];
  ASSERT_EQ(it["count"], 4);
  const auto times = it["times_ns"].get<std::vector<int64_t>>();
  ASSERT_EQ(times.size(), 4u);
  // Iteration 0 is the single iteration; the fold's deterministic program
  // then repeats one steady-state time, which is the headline.
  EXPECT_EQ(times[0], a["iteration_time_ns"].get<int64_t>());
  EXPECT_EQ(times[2], times[1]);
  EXPECT_EQ(times[3], times[1]);
  EXPECT_EQ(j["iteration_time_ns"], times[1]);
  EXPECT_EQ(it["run_time_ns"].get<int64_t>(), times[0] + times[1] + times[2] + times[3]);
  EXPECT_EQ(j["timeline"]["iterations"], 4);
  const auto trace = nlohmann::json::parse(read_file(four / "s.trace.json"));
  EXPECT_EQ(trace["otherData"]["iterations"], 4);
  // Fold is exact without variability: the full run gives the same times.
  // (Full rank on 3,072 GPUs takes seconds per iteration: not under ASan.)
}

TEST(IterationsE2E, FoldEqualsFullOverIterations) {
  TempDir folded("it-fold"), full("it-full");
  ASSERT_EQ(simulate(kSmall, "--ideal --fold --iterations 3", folded).exit_code, 0);
  ASSERT_EQ(simulate(kSmall, "--ideal --iterations 3", full).exit_code, 0);
  const auto f = nlohmann::json::parse(read_file(folded / "s.json"));
  const auto g = nlohmann::json::parse(read_file(full / "s.json"));
  EXPECT_EQ(f["iterations"]["times_ns"], g["iterations"]["times_ns"]);
}

TEST(IterationsE2E, SamplesWithoutVariabilityRunOnceAndAreIdenticalForAnyThreadCount) {
  TempDir j1("mc-j1"), j2("mc-j2"), j4("mc-j4");
  const auto a = simulate(kSmall, "--ideal --iterations 2 --samples 5 --seed 7 -j 1", j1);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  for (const auto& [jobs, dir] : {std::pair{"2", &j2}, std::pair{"4", &j4}}) {
    const auto b = simulate(kSmall, std::string("--ideal --iterations 2 --samples 5 --seed 7 -j ") + jobs, *dir);
    ASSERT_EQ(b.exit_code, 0) << b.output;
    for (const char* f : {"s.json", "s.trace.json", "s.svg"}) {
      EXPECT_EQ(read_file(j1 / f), read_file(*dir / f)) << f << " with -j " << jobs;
    }
  }
  EXPECT_NE(a.output.find("5 (seed 7): no variability in this run, so every sample equals it (simulated once)"),
            std::string::npos)
      << a.output;
  const auto j = nlohmann::json::parse(read_file(j1 / "s.json"));
  const auto& mc = j["monte_carlo"];
  EXPECT_EQ(mc["samples"], 5);
  EXPECT_EQ(mc["identical"], true);
  EXPECT_EQ(mc["per_sample"]["seed"], nlohmann::json::parse("[7,8,9,10,11]"));
  EXPECT_EQ(mc["iteration_time_s"]["p99"], j["iteration_time_s"]);
  EXPECT_EQ(mc["mfu"]["mean"], j["mfu"]);
}

// With the preset's variability (GPU speed spread) every sample draws its own
// per-GPU factors: the samples differ, sample i has seed S + i, sample 0 is
// the plain run with --seed S, and the result does not depend on -j.
TEST(IterationsE2E, SamplesWithVariabilityDifferAndDoNotDependOnThreads) {
  TempDir j1("mcv-j1"), j2("mcv-j2"), plain("mcv-plain");
  const auto a = simulate(kSmall, "--samples 6 --seed 11 -j 1 --no-trace --no-svg", j1);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const auto b = simulate(kSmall, "--samples 6 --seed 11 -j 2 --no-trace --no-svg", j2);
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_EQ(read_file(j1 / "s.json"), read_file(j2 / "s.json"));
  const auto p = simulate(kSmall, "--seed 11 --no-trace --no-svg", plain);
  ASSERT_EQ(p.exit_code, 0) << p.output;
  const auto j = nlohmann::json::parse(read_file(j1 / "s.json"));
  const auto& mc = j["monte_carlo"];
  EXPECT_EQ(mc["identical"], false);
  EXPECT_EQ(mc["per_sample"]["seed"], nlohmann::json::parse("[11,12,13,14,15,16]"));
  const auto times = mc["per_sample"]["iteration_time_s"].get<std::vector<double>>();
  ASSERT_EQ(times.size(), 6u);
  EXPECT_EQ(times[0], nlohmann::json::parse(read_file(plain / "s.json"))["iteration_time_s"].get<double>());
  EXPECT_GT(std::set<double>(times.begin(), times.end()).size(), 1u) << "every sample drew the same GPUs";
}

TEST(IterationsE2E, BadValuesAreRejectedNamingTheFlag) {
  for (const char* bad : {"--iterations 0", "--samples 0", "-j 0", "--iterations x", "--seed -1", "--seed x",
                          "--seed 18446744073709551616", "--seed 1e3"}) {
    const auto r = run_lacuna("simulate " + kSmall + " --no-trace --no-svg " + bad);
    EXPECT_EQ(r.exit_code, 2) << bad << "\n" << r.output;
    const std::string flag = std::string(bad).substr(0, std::string(bad).find(' '));
    EXPECT_NE(r.output.find(flag == "-j" ? "--jobs" : flag), std::string::npos) << r.output;
  }
}

}  // namespace
}  // namespace lacuna::testing
