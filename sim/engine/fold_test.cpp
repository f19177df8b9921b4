#include "sim/engine/fold.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "sim/engine/pipeline_program.h"
#include "sim/engine/simulator.h"

namespace lacuna::engine {
namespace {

using testing::ClosedFormCost;
using testing::make_pipeline_program;
using testing::pipeline_rank;
using testing::PipelineSpec;
using testing::RecordingObserver;

TimeNs run(const ir::Program& p, bool fold, SimulationResult* out = nullptr) {
  ClosedFormCost cost;
  Simulator sim(p, cost, SimulationOptions{fold});
  const SimulationResult r = sim.run();
  if (out) *out = r;
  return r.end_time;
}

// Every rank is represented exactly once, by a simulated rank of the same
// class and speed.
void expect_partition(const ir::Program& p, const SimulatedSet& set) {
  ASSERT_EQ(set.ranks.size(), set.represents.size());
  std::vector<int> seen(static_cast<size_t>(p.ranks_size()), 0);
  for (size_t i = 0; i < set.ranks.size(); ++i) {
    const auto& self = p.ranks(set.ranks[i]);
    EXPECT_THAT(set.represents[i], ::testing::Contains(set.ranks[i]));
    for (int32_t r : set.represents[i]) {
      ++seen[r];
      EXPECT_EQ(p.ranks(r).class_id(), self.class_id());
      EXPECT_EQ(p.ranks(r).compute_time_scale(), self.compute_time_scale());
    }
  }
  for (int r = 0; r < p.ranks_size(); ++r) EXPECT_EQ(seen[r], 1) << "rank " << r;
}

TEST(Fold, FullModeSimulatesEveryRankForItself) {
  const ir::Program p = make_pipeline_program(PipelineSpec{});
  const SimulatedSet set = plan_simulated_ranks(p, false);
  ASSERT_EQ(set.ranks.size(), static_cast<size_t>(p.ranks_size()));
  expect_partition(p, set);
}

TEST(Fold, RepresentativesFormOnePipeline) {
  PipelineSpec spec;
  spec.tp = 4;
  spec.pp = 4;
  spec.dp = 3;
  const ir::Program p = make_pipeline_program(spec);
  const SimulatedSet set = plan_simulated_ranks(p, true);
  std::vector<int32_t> pipeline;
  for (int32_t s = 0; s < spec.pp; ++s) pipeline.push_back(pipeline_rank(spec, 0, 0, s));
  EXPECT_EQ(set.ranks, pipeline);
  expect_partition(p, set);
  for (const auto& rep : set.represents) EXPECT_EQ(rep.size(), static_cast<size_t>(spec.tp * spec.dp));
}

TEST(Fold, SymmetricProgramsGiveTheFullEndTime) {
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    std::mt19937_64 rng(seed);
    const PipelineSpec spec = testing::random_pipeline_spec(rng, seed, 4, 5);
    const ir::Program p = make_pipeline_program(spec);
    SimulationResult full, folded;
    EXPECT_EQ(run(p, true, &folded).count(), run(p, false, &full).count()) << "seed " << seed;
    EXPECT_EQ(folded.simulated_ranks.size(), static_cast<size_t>(spec.pp));
    EXPECT_LE(folded.events, full.events);
  }
}

TEST(Fold, HostCostsArePerClassSoFoldStaysExact) {
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    std::mt19937_64 rng(seed * 31);
    PipelineSpec spec;
    spec.tp = 1 + static_cast<int32_t>(rng() % 4);
    spec.pp = 1 + static_cast<int32_t>(rng() % 4);
    spec.dp = 1 + static_cast<int32_t>(rng() % 3);
    spec.microbatches = 1 + static_cast<int32_t>(rng() % 5);
    spec.seed = seed;
    ir::Program p = make_pipeline_program(spec);
    testing::add_random_host_costs(p, seed, 4000, 4);
    const TimeNs without = run(make_pipeline_program(spec), false);
    SimulationResult full, folded;
    EXPECT_EQ(run(p, true, &folded).count(), run(p, false, &full).count()) << "seed " << seed;
    EXPECT_GT(full.end_time, without) << "seed " << seed << ": the host costs must matter";
  }
}

TEST(Fold, OneSlowedRankStillGivesTheFullEndTime) {
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    std::mt19937_64 rng(seed * 7919);
    PipelineSpec spec;
    spec.tp = 2 + static_cast<int32_t>(rng() % 3);
    spec.pp = 2 + static_cast<int32_t>(rng() % 3);
    spec.dp = 2 + static_cast<int32_t>(rng() % 2);
    spec.microbatches = 2 + static_cast<int32_t>(rng() % 4);
    spec.seed = seed;
    ir::Program p = make_pipeline_program(spec);
    const int32_t slow = static_cast<int32_t>(rng() % static_cast<uint64_t>(p.ranks_size()));
    p.mutable_ranks(slow)->set_compute_time_scale(1.0 + static_cast<double>(rng() % 100) / 100.0 + 0.05);
    const TimeNs symmetric = run(make_pipeline_program(spec), false);
    SimulationResult folded;
    const TimeNs full = run(p, false);
    EXPECT_GT(full.count(), symmetric.count()) << "the slowdown must matter for this test to mean anything";
    EXPECT_EQ(run(p, true, &folded).count(), full.count()) << "seed " << seed << " slow rank " << slow;
    EXPECT_THAT(folded.simulated_ranks, ::testing::Contains(slow));
    expect_partition(p, plan_simulated_ranks(p, true));
  }
}

TEST(Fold, ObserverLearnsWhomEachSimulatedRankRepresents) {
  PipelineSpec spec;
  const ir::Program p = make_pipeline_program(spec);
  ClosedFormCost cost;
  Simulator sim(p, cost, SimulationOptions{true});
  RecordingObserver obs;
  sim.add_observer(&obs);
  sim.run();
  const SimulatedSet set = plan_simulated_ranks(p, true);
  EXPECT_EQ(obs.simulated, set.ranks);
  EXPECT_EQ(obs.represents, set.represents);
  std::set<int32_t> span_ranks;
  for (const auto& s : obs.spans) span_ranks.insert(s.rank);
  EXPECT_EQ(std::vector<int32_t>(span_ranks.begin(), span_ranks.end()), set.ranks);
}

}  // namespace
}  // namespace lacuna::engine
