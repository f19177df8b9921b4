// mean_pass_times (pass_times.h): exact on synthetic stages with fixed pass
// times, and the boundary transfer as the cost model times it.
#include "sim/compiler/pass_times.h"

#include <gtest/gtest.h>

#include "sim/compiler/compile.h"
#include "sim/compiler/compiler_test_support.h"
#include "sim/core/error.h"
#include "sim/schedule/synthetic.h"

namespace lacuna::compiler {
namespace {

TEST(PassTimes, SyntheticStagesGiveTheirOwnTimes) {
  schedule::SyntheticPipeline p;
  p.kind = scenario::ZB_H1;
  p.shape = {.pp = 4, .virtual_stages = 1, .microbatches = 8};
  // Rank r: F 100 + r, I 110 + 2r, W 70 + 3r; means 101.5, 113, 74.5 → truncated.
  for (int r = 0; r < 4; ++r)
    p.per_stage.push_back({TimeNs(100 + r), TimeNs(110 + 2 * r), TimeNs(70 + 3 * r)});
  const testing::TrivialCost cost;
  const PassTimes t = mean_pass_times(schedule::build_synthetic_program(p), cost);
  EXPECT_EQ(t.stages, 4);
  EXPECT_EQ(t.forward, TimeNs(101));
  EXPECT_EQ(t.backward_input, TimeNs(113));
  EXPECT_EQ(t.backward_weight, TimeNs(74));
  EXPECT_EQ(t.p2p, TimeNs(0));  // synthetic transfers carry no bytes
}

TEST(PassTimes, CompiledStagesSplitTheBackwardAndTimeTheBoundary) {
  testing::Small s;  // TP 2 × PP 2 × DP 2 on one node, hidden 256, seq 128, micro-batch 2
  const testing::TrivialCost cost;
  const PassTimes t = mean_pass_times(compile(testing::make_scenario(s)), cost);
  EXPECT_EQ(t.stages, 2);
  EXPECT_GT(t.forward, TimeNs(0));
  EXPECT_GT(t.backward_input, TimeNs(0));
  EXPECT_GT(t.backward_weight, TimeNs(0));
  // Weight gradients are one GEMM per linear layer, input gradients one plus
  // the attention and elementwise backward: I > W.
  EXPECT_GT(t.backward_input, t.backward_weight);
  // One activation, b·s·h bf16 = 2·128·256·2 B, within the node: 200 ns + bytes/1000.
  EXPECT_EQ(t.p2p, TimeNs(200 + 131072 / 1000));
}

TEST(PassTimes, AProgramWithoutPassesIsAnError) {
  ir::Program empty;
  const testing::TrivialCost cost;
  EXPECT_THROW(mean_pass_times(empty, cost), Error);
}

}  // namespace
}  // namespace lacuna::compiler
