// The pre-run estimate against the runs it estimates: events and ops exact
// without host costs (full rank and folded, one and several iterations),
// bracketed with them; state that grows with the ranks simulated.
#include "sim/engine/run_estimate.h"

#include <gtest/gtest.h>

#include <random>

#include "sim/engine/engine_test_support.h"
#include "sim/engine/pipeline_program.h"
#include "sim/engine/simulator.h"

namespace lacuna::engine {
namespace {

using testing::ClosedFormCost;
using testing::PipelineSpec;

ir::Program random_pipeline(uint64_t seed) {
  std::mt19937_64 rng(seed);
  const PipelineSpec spec = testing::random_pipeline_spec(rng, seed);
  return make_pipeline_program(spec);
}

TEST(RunEstimate, EventsAndOpsAreExactWithoutHostCosts) {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    const ir::Program p = random_pipeline(seed);
    for (const bool fold : {false, true}) {
      for (const int32_t iterations : {1, 3}) {
        SimulationOptions o;
        o.fold = fold;
        o.iterations = iterations;
        const EngineEstimate e = estimate_engine(p, o);
        ClosedFormCost cost;
        const SimulationResult r = Simulator(p, cost, o).run();
        SCOPED_TRACE(::testing::Message() << "seed " << seed << " fold " << fold << " iterations " << iterations);
        EXPECT_EQ(e.events, r.events);
        EXPECT_EQ(e.ops, r.ops);
        EXPECT_EQ(e.host_events, 0u);
        EXPECT_EQ(e.simulated_ranks, static_cast<int64_t>(r.simulated_ranks.size()));
        EXPECT_EQ(e.represented_ranks, p.ranks_size());
      }
    }
  }
}

TEST(RunEstimate, HostCostsBracketTheEvents) {
  for (uint64_t seed = 1; seed <= 15; ++seed) {
    ir::Program p = random_pipeline(seed);
    testing::add_random_host_costs(p, seed, /*max_ns=*/50'000, /*sync_one_in=*/7);
    SimulationOptions o;
    o.iterations = 2;
    const EngineEstimate e = estimate_engine(p, o);
    ClosedFormCost cost;
    const SimulationResult r = Simulator(p, cost, o).run();
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    EXPECT_GT(e.host_events, 0u);
    EXPECT_LE(e.events, r.events);
    EXPECT_GE(e.events + e.host_events, r.events);
  }
}

TEST(RunEstimate, StateGrowsWithTheRanksSimulated) {
  // The same classes at dp 2, 4 and 8: everything per rank, per group
  // member and per mailbox doubles with each step, the classes stay, so the
  // state is affine in dp.
  PipelineSpec spec;
  SimulationOptions full;
  std::vector<int64_t> state;
  for (const int32_t dp : {2, 4, 8}) {
    spec.dp = dp;
    state.push_back(estimate_engine(make_pipeline_program(spec), full).state.count());
  }
  EXPECT_GT(state[0], 0);
  EXPECT_GT(state[1], state[0]);
  EXPECT_EQ(state[2] - state[1], 2 * (state[1] - state[0]));
  const EngineEstimate b = estimate_engine(make_pipeline_program(spec), full);
  SimulationOptions folded;
  folded.fold = true;
  const EngineEstimate f = estimate_engine(make_pipeline_program(spec), folded);
  EXPECT_LT(f.simulated_ranks, b.simulated_ranks);
  EXPECT_LT(f.state.count(), b.state.count());
}

}  // namespace
}  // namespace lacuna::engine
