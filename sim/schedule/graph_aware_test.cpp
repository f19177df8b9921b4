// Graph-aware 1F1B (graph_aware.h): closed-form warm-ups, the extension an
// interleaved downstream forces, frozen stages, and validity over shapes.
#include "sim/schedule/graph_aware.h"

#include <gtest/gtest.h>

#include <random>

#include "sim/core/error.h"
#include "sim/schedule/validate_actions.h"

namespace lacuna::schedule {
namespace {

GraphAwareInput input(int32_t stages, int32_t distance, std::vector<int32_t> need, std::vector<bool> trains = {}) {
  GraphAwareInput in;
  in.stages = stages;
  in.sink_distance = distance;
  in.downstream_need = std::move(need);
  in.trains = trains.empty() ? std::vector<bool>(static_cast<size_t>(stages), true) : std::move(trains);
  in.module = "vit";
  return in;
}

// Three encoder stages before a 1F1B LLM of pp 2 (its stage 0 runs pp + i
// forwards before microbatch i's backward), 6 microbatches: stage j warms up
// with its distance to the sink, (2 − j) + 2, forwards.
TEST(GraphAware, WarmsUpWithTheDistanceToTheSink) {
  const ActionSchedule s = graph_aware_1f1b(input(3, 2, {2, 3, 4, 5, 6, 6}));
  EXPECT_EQ(format_schedule(s),
            "rank 0: vit:0F0 vit:0F1 vit:0F2 vit:0F3 vit:0F4 vit:0B0 vit:0F5 vit:0B1 vit:0B2 vit:0B3 vit:0B4 "
            "vit:0B5\n"
            "rank 1: vit:1F0 vit:1F1 vit:1F2 vit:1F3 vit:1B0 vit:1F4 vit:1B1 vit:1F5 vit:1B2 vit:1B3 vit:1B4 "
            "vit:1B5\n"
            "rank 2: vit:2F0 vit:2F1 vit:2F2 vit:2B0 vit:2F3 vit:2B1 vit:2F4 vit:2B2 vit:2F5 vit:2B3 vit:2B4 "
            "vit:2B5\n");
}

// An interleaved LLM's stage 0 runs a whole round of chunk-0 forwards before
// its first chunk-0 backward: the encoder's warm-up grows to match.
TEST(GraphAware, ExtendsTheWarmUpToWhatTheDownstreamConsumes) {
  const ActionSchedule s = graph_aware_1f1b(input(1, 1, {4, 4, 4, 4, 6, 6}));
  EXPECT_EQ(format_schedule(s),
            "rank 0: vit:0F0 vit:0F1 vit:0F2 vit:0F3 vit:0B0 vit:0B1 vit:0B2 vit:0F4 vit:0B3 vit:0F5 vit:0B4 "
            "vit:0B5\n");
}

TEST(GraphAware, FrozenStagesRunForwardsOnly) {
  const ActionSchedule s = graph_aware_1f1b(input(2, 1, {1, 2, 3}, {false, true}));
  EXPECT_EQ(format_schedule(s),
            "rank 0: vit:0F0 vit:0F1 vit:0F2\n"
            "rank 1: vit:1F0 vit:1F1 vit:1B0 vit:1F2 vit:1B1 vit:1B2\n");
  EXPECT_THROW(graph_aware_1f1b(input(2, 1, {1}, {true})), Error);
}

// Without the prefix, a trained island is a pipeline of its own: every
// stage's forward and backward of every microbatch, runnable.
TEST(GraphAware, TrainedIslandsAreValidPipelines) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    const int32_t stages = 1 + static_cast<int32_t>(rng() % 5), m = 1 + static_cast<int32_t>(rng() % 12);
    const int32_t distance = static_cast<int32_t>(rng() % 6);
    std::vector<int32_t> need(static_cast<size_t>(m));
    for (int32_t i = 0; i < m; ++i) need[static_cast<size_t>(i)] = std::min<int32_t>(m, i + 1 + rng() % 4);
    ActionSchedule s = graph_aware_1f1b(input(stages, distance, need));
    for (auto& rank : s)
      for (auto& a : rank) a->module.clear();
    const PipelineShape shape{.pp = stages, .virtual_stages = 1, .microbatches = m};
    EXPECT_NO_THROW(validate_actions(s, shape, "island")) << format_schedule(s);
  }
}

}  // namespace
}  // namespace lacuna::schedule
