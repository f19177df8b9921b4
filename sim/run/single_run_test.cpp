// One run assembled (sim/run/): run::simulate and simulate_and_summarize
// against the engine driven by hand, and SimulationRun's summary, samples
// and re-runs on a program without variability.
#include "sim/run/single_run.h"

#include <gtest/gtest.h>

#include "sim/engine/pipeline_program.h"
#include "sim/report/observers/bubble_accounting.h"
#include "sim/run/simulation_run.h"

namespace lacuna::run {
namespace {

using engine::testing::ClosedFormCost;

ir::Program program() {
  engine::testing::PipelineSpec spec;
  spec.tp = 2;
  spec.pp = 3;
  spec.dp = 2;
  spec.microbatches = 4;
  ir::Program p = engine::testing::make_pipeline_program(spec);
  p.mutable_info()->set_peak_flops_per_gpu(1e12);
  p.mutable_info()->set_model_flops_per_iteration(1e9);
  p.mutable_info()->set_tokens_per_iteration(1000);
  return p;
}

TEST(SingleRun, IsTheEngineRunByHand) {
  const ir::Program p = program();
  const ClosedFormCost cost;
  for (const bool fold : {false, true}) {
    engine::Simulator by_hand(p, cost, {.fold = fold});
    report::BubbleAccounting accounting;
    by_hand.add_observer(&accounting);
    const engine::SimulationResult expected = by_hand.run();
    const report::Summary expected_summary = report::summarize(p, accounting, std::string(cost.name()), fold);

    const SimulatedRun r = simulate(p, cost, NetworkMode::kAnalytic, {.fold = fold});
    EXPECT_EQ(r.result.end_time, expected.end_time);
    EXPECT_EQ(r.result.events, expected.events);
    EXPECT_EQ(r.models, std::string(cost.name()));  // analytic: the cost model alone times communication

    const SummarizedRun s = simulate_and_summarize(p, cost, NetworkMode::kAnalytic, fold);
    EXPECT_EQ(s.run.result.end_time, expected.end_time);
    EXPECT_EQ(s.summary.iteration_time, expected_summary.iteration_time);
    EXPECT_EQ(s.summary.cost_model, r.models);
    EXPECT_DOUBLE_EQ(s.summary.mfu, expected_summary.mfu);
    for (size_t b = 0; b < s.summary.bubbles.size(); ++b) {
      EXPECT_EQ(s.summary.bubbles[b].max, expected_summary.bubbles[b].max) << b;
    }
  }
}

TEST(SingleRun, ObserversSeeTheRun) {
  const ir::Program p = program();
  const ClosedFormCost cost;
  report::BubbleAccounting extra;
  engine::Observer* observers[] = {&extra};
  const SimulatedRun r = simulate(p, cost, NetworkMode::kAnalytic, {}, observers);
  EXPECT_EQ(extra.iteration_time(), r.result.end_time);
}

TEST(SimulationRun, SummarizesResimulatesAndSamples) {
  const ir::Program p = program();  // no variability: every sample equals the first
  const ClosedFormCost cost;
  SimulationRun plain(p, cost, {.network = NetworkMode::kAnalytic, .sampling = {}});
  const report::Summary s = plain.run();
  EXPECT_EQ(s.iteration_time, simulate(p, cost, NetworkMode::kAnalytic, {}).result.end_time);
  EXPECT_TRUE(s.comm.has_value());
  EXPECT_TRUE(s.links.has_value());
  EXPECT_FALSE(s.monte_carlo.has_value());
  EXPECT_FALSE(s.variability.has_value());
  EXPECT_GT(plain.events(), 0u);
  EXPECT_EQ(plain.resimulate(cost), s.iteration_time);

  SimulationRun sampled(p, cost,
                        {.network = NetworkMode::kAnalytic,
                         .sampling = {.iterations = 1, .samples = 3, .seed = 0, .jobs = 1},
                         .seed_override = 7});
  const report::Summary m = sampled.run();
  ASSERT_TRUE(m.monte_carlo.has_value());
  EXPECT_EQ(m.monte_carlo->samples, 3);
  EXPECT_TRUE(m.monte_carlo->identical);
  EXPECT_EQ(m.monte_carlo->seed, 7u);
  EXPECT_EQ(sampled.seed(), 7u);
  EXPECT_EQ(m.iteration_time, s.iteration_time);
}

}  // namespace
}  // namespace lacuna::run
