// The Monte Carlo plug-in point (sim/run/monte_carlo_runner.h): a SampleRunner
// receives (i, S + i) for i = 1..K-1, sample 0 is the observed run, the result
// is the same for any thread count, and without randomness nothing but the
// observed run happens.
#include "sim/run/monte_carlo_runner.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <utility>

#include "sim/engine/pipeline_program.h"

namespace lacuna::run {
namespace {

using engine::testing::ClosedFormCost;
using engine::testing::make_pipeline_program;
using engine::testing::PipelineSpec;

ir::Program program() {
  PipelineSpec spec;
  spec.tp = 2;
  spec.pp = 2;
  spec.dp = 2;
  spec.dp_bytes = 4096;
  ir::Program p = make_pipeline_program(spec);
  p.mutable_info()->set_peak_flops_per_gpu(1e12);
  p.mutable_info()->set_model_flops_per_iteration(1e9);
  p.mutable_info()->set_tokens_per_iteration(1000);
  return p;
}

// A stand-in for the variability model: every rank slowed by a factor drawn
// from the seed (rank 0 of sample i by 1 + (i mod 7) / 10), so samples differ.
report::SampleOutcome jittered(const ir::Program& base, const ClosedFormCost& cost, uint64_t seed, uint64_t& events) {
  ir::Program p = base;
  for (int r = 0; r < p.ranks_size(); ++r) {
    p.mutable_ranks(r)->set_compute_time_scale(1.0 + static_cast<double>((seed + 3 * r) % 7) / 10);
  }
  const engine::SimulationResult res = engine::Simulator(p, cost, {.iterations = 2, .seed = seed}).run();
  events = res.events;
  return {seed, res.iteration_ends};
}

TEST(MonteCarloRunner, RunnerGetsSeedPlusIndexAndResultsDoNotDependOnThreads) {
  const ir::Program p = program();
  const ClosedFormCost cost;
  std::string first;
  for (int jobs : {1, 2, 4}) {
    SamplingPlan o{.iterations = 2, .samples = 9, .seed = 100, .jobs = jobs};
    std::atomic<int> observed_calls{0};
    std::mutex m;
    std::set<std::pair<size_t, uint64_t>> calls;
    uint64_t events = 0;
    const report::MonteCarlo mc = run_monte_carlo(
        p, o, /*random=*/true,
        [&] {
          ++observed_calls;
          uint64_t e = 0;
          report::SampleOutcome out = jittered(p, cost, 100, e);
          return out;
        },
        [&](size_t i, uint64_t seed, uint64_t& e) {
          {
            std::lock_guard lock(m);
            calls.insert({i, seed});
          }
          return jittered(p, cost, seed, e);
        },
        events);
    EXPECT_EQ(observed_calls.load(), 1);
    std::set<std::pair<size_t, uint64_t>> expected;
    for (size_t i = 1; i < 9; ++i) expected.insert({i, 100 + i});
    EXPECT_EQ(calls, expected) << "jobs " << jobs;
    EXPECT_GT(events, 0u);
    EXPECT_FALSE(mc.identical);
    ASSERT_EQ(mc.per_sample.size(), 9u);
    for (size_t i = 0; i < 9; ++i) EXPECT_EQ(mc.per_sample[i].seed, 100 + i);
    EXPECT_GT(mc.iteration_time.max, mc.iteration_time.min) << "the samples differ";
    const std::string json = report::monte_carlo_json(mc);
    if (first.empty()) {
      first = json;
    } else {
      EXPECT_EQ(json, first) << "jobs " << jobs;
    }
  }
}

TEST(MonteCarloRunner, WithoutRandomnessOnlyTheObservedRunHappens) {
  const ir::Program p = program();
  const ClosedFormCost cost;
  SamplingPlan o{.iterations = 2, .samples = 6, .seed = 3, .jobs = 2};
  int observed_calls = 0;
  uint64_t events = 0;
  const report::MonteCarlo mc = run_monte_carlo(
      p, o, /*random=*/false,
      [&] {
        ++observed_calls;
        uint64_t e = 0;
        return jittered(p, cost, 3, e);
      },
      [&](size_t, uint64_t, uint64_t&) -> report::SampleOutcome {
        ADD_FAILURE() << "runner called without randomness";
        return {};
      },
      events);
  EXPECT_EQ(observed_calls, 1);
  EXPECT_TRUE(mc.identical);
  ASSERT_EQ(mc.per_sample.size(), 6u);
  EXPECT_EQ(mc.per_sample[5].seed, 8u);
  EXPECT_EQ(mc.per_sample[5].iteration_ends, mc.per_sample[0].iteration_ends);
  EXPECT_EQ(mc.iteration_time.stddev, 0.0);
}

TEST(MonteCarloRunner, BareRunnerIsTheSimulationWithTheSamplesSeed) {
  const ir::Program p = program();
  const ClosedFormCost cost;
  const engine::SimulationOptions base{.iterations = 3, .seed = 1};
  const SampleRunner run = bare_sample_runner(p, cost, NetworkMode::kAnalytic, base);
  uint64_t events = 0;
  const report::SampleOutcome out = run(4, 77, events);
  EXPECT_EQ(out.seed, 77u);
  const engine::SimulationResult direct = engine::Simulator(p, cost, {.iterations = 3, .seed = 77}).run();
  EXPECT_EQ(out.iteration_ends, direct.iteration_ends);
  EXPECT_EQ(events, direct.events);
  ASSERT_EQ(out.iteration_ends.size(), 3u);
}

}  // namespace
}  // namespace lacuna::run
