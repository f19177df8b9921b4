#include "sim/report/analyses/monte_carlo.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <set>

#include "sim/engine/pipeline_program.h"
#include "sim/engine/simulator.h"
#include "sim/report/analyses/summary.h"

namespace lacuna::report {
namespace {

using engine::testing::ClosedFormCost;
using engine::testing::make_pipeline_program;
using engine::testing::PipelineSpec;

ir::ProgramInfo info() {
  ir::ProgramInfo i;
  i.set_peak_flops_per_gpu(1e12);
  i.set_model_flops_per_iteration(1e9);
  i.set_tokens_per_iteration(1000);
  return i;
}

TEST(MonteCarlo, SampleSeedsAreSeedPlusIndex) {
  EXPECT_EQ(sample_seed(42, 0), 42u);
  EXPECT_EQ(sample_seed(42, 5), 47u);
  EXPECT_EQ(sample_seed(~uint64_t{0}, 1), 0u) << "mod 2^64";
}

TEST(MonteCarlo, IdenticalSamplesAreOneRunStandingForAll) {
  const MonteCarlo mc = summarize_samples({{7, {TimeNs(1000), TimeNs(1900), TimeNs(2800)}}}, 5, 7, true, info(), 4);
  EXPECT_TRUE(mc.identical);
  ASSERT_EQ(mc.per_sample.size(), 5u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(mc.per_sample[i].seed, 7 + i);
  EXPECT_EQ(mc.iterations, 3);
  // Steady-state mean of iterations 1..2: (2800 - 1000) / 2 = 900 ns.
  EXPECT_DOUBLE_EQ(mc.iteration_time.mean, 900e-9);
  EXPECT_DOUBLE_EQ(mc.mfu[0], throughput(info(), 4, TimeNs(900)).mfu);
  ASSERT_TRUE(mc.iteration_time.mean_ci);
  EXPECT_EQ(mc.iteration_time.mean_ci->low, mc.iteration_time.mean_ci->high);
  for (const Quantile& q : mc.mfu_distribution.quantiles) {
    ASSERT_TRUE(q.ci) << "a point mass: exact intervals even for p99 of 5";
    EXPECT_EQ(q.ci->low, q.value);
    EXPECT_EQ(q.coverage, 1.0);
  }
  const auto j = nlohmann::json::parse(monte_carlo_json(mc));
  EXPECT_EQ(j["identical"], true);
  EXPECT_EQ(j["per_sample"]["iteration_time_s"].size(), 5u);
  EXPECT_EQ(j["per_sample"]["iteration_times_s"][4].size(), 3u);
  EXPECT_NE(format_monte_carlo(mc).find("no variability"), std::string::npos);
}

// A sample varies the program as a variability model would: each rank's
// compute slowed by a factor drawn from (seed, rank) with a counter-based
// hash, so the draw does not depend on the thread that runs the sample.
uint64_t mix(uint64_t x) {  // SplitMix64's finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

SampleOutcome jittered_sample(const ir::Program& base, uint64_t seed, int32_t iterations) {
  ir::Program p = base;
  for (int r = 0; r < p.ranks_size(); ++r) {
    const double u = static_cast<double>(mix(seed ^ mix(static_cast<uint64_t>(r))) >> 11) * 0x1.0p-53;
    p.mutable_ranks(r)->set_compute_time_scale(1.0 + 0.2 * u);
  }
  ClosedFormCost cost;
  engine::Simulator sim(p, cost, {.iterations = iterations, .seed = seed});
  return {seed, sim.run().iteration_ends};
}

TEST(MonteCarlo, SamplesAreTheSameForAnyThreadCount) {
  PipelineSpec spec;
  spec.tp = 2;
  spec.pp = 3;
  spec.dp = 2;
  spec.dp_bytes = 4096;  // else the DP all-reduce, 1 ms per iteration, sets the pace
  const ir::Program p = make_pipeline_program(spec);
  std::string first;
  for (int jobs : {1, 2, 3, 4}) {
    std::vector<SampleOutcome> out =
        run_samples(12, 1000, jobs, [&](size_t, uint64_t seed) { return jittered_sample(p, seed, 3); });
    ASSERT_EQ(out.size(), 12u);
    for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i].seed, 1000 + i);
    const MonteCarlo mc = summarize_samples(std::move(out), 12, 1000, false, info(), p.ranks_size());
    const std::string json = monte_carlo_json(mc);
    if (first.empty()) {
      first = json;
      // The samples differ, and sample i alone reproduces with seed 1000 + i.
      EXPECT_EQ(std::set<double>(mc.iteration_time_s.begin(), mc.iteration_time_s.end()).size(), 12u);
      EXPECT_EQ(mc.per_sample[5].iteration_ends, jittered_sample(p, 1005, 3).iteration_ends);
      EXPECT_GT(mc.iteration_time.stddev, 0);
      EXPECT_LE(mc.iteration_time.min, mc.iteration_time.quantiles[0].value);
      EXPECT_FALSE(mc.iteration_time.quantiles[1].ci) << "p90 needs 36 samples";
      EXPECT_TRUE(mc.iteration_time.quantiles[0].ci);
      const std::string text = format_monte_carlo(mc);
      EXPECT_NE(text.find("n/a: needs ≥ 36 samples"), std::string::npos) << text;
      EXPECT_NE(text.find("sample i: seed 1000 + i"), std::string::npos) << text;
    } else {
      EXPECT_EQ(json, first) << "jobs " << jobs;
    }
  }
}

}  // namespace
}  // namespace lacuna::report
