// A schedule file's data-parallel actions through the stage compiler
// (docs/schedules.md#the-dp-pass): written where the DP pass places them,
// they compile to the very program the file without them gives; moved, the
// program moves its gathers and reductions with them.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "sim/compiler/compile.h"
#include "sim/compiler/compiler_test_support.h"
#include "sim/compiler/custom_schedule.h"
#include "sim/compiler/rank_layout.h"
#include "sim/engine/simulator.h"
#include "sim/schedule/action.h"
#include "sim/schedule/lower_dp.h"

namespace lacuna::compiler {
namespace {

class DpActionsCompile : public ::testing::Test {
 protected:
  scenario::LoadedScenario with_file(const testing::Small& s, const std::string& text, const std::string& name) {
    return files_.scenario(s, text, name);
  }
  // The built-in order of `s` with the DP pass's actions.
  schedule::ActionSchedule placed(const testing::Small& s);

  testing::ScheduleFiles files_;
};

// TP 2 × PP 2 × DP 2, two chunks, four microbatches, distributed optimizer.
testing::Small model(bool overlap_grad) {
  testing::Small s;
  s.layers = 8;
  s.v = 2;
  s.global_batch = 16;
  s.micro_batch = 2;
  s.overlap_grad = overlap_grad;
  s.schedule = scenario::INTERLEAVED_1F1B;
  // A file's blocking calls follow the generic rule, under which the
  // interleaved order deadlocks (docs/schedules.md#blocking-calls-that-deadlock).
  s.execution.set_pipeline_p2p(scenario::P2P_OVERLAPPED);
  return s;
}

schedule::PipelineShape shape_of(const testing::Small& s) {
  return {.pp = 2, .virtual_stages = static_cast<int32_t>(s.v), .microbatches = 4};
}

// Interleaved with two chunks; with one (blocking p2p) ZB-H1's order, which
// the generic rule's calls complete.
schedule::ActionSchedule order_of(const testing::Small& s) {
  const schedule::PipelineShape shape = shape_of(s);
  return schedule::to_actions(
      schedule::build_schedule(s.v > 1 ? scenario::INTERLEAVED_1F1B : scenario::ZB_H1, shape), shape);
}

schedule::ActionSchedule DpActionsCompile::placed(const testing::Small& s) {
  const schedule::ActionSchedule plain = order_of(s);
  return schedule::add_dp_actions(plain, shape_of(s),
                                  scenario_dp_settings(with_file(s, schedule::format_schedule(plain), "plain.txt")));
}

// Per chunk, in DP-stream order: the collectives' kinds of rank class pp0.
std::vector<std::pair<int32_t, ir::CollectiveKind>> dp_stream(const ir::Program& p) {
  std::vector<std::pair<int32_t, ir::CollectiveKind>> out;
  for (const ir::Stream& s : p.classes(0).streams())
    if (s.kind() == ir::DP_COMM)
      for (const ir::Op& op : s.ops())
        if (op.has_collective() && op.collective().group_slot() == kSlotDpCp)
          out.emplace_back(op.chunk(), op.collective().kind());
  return out;
}

TEST_F(DpActionsCompile, WrittenWhereThePassPutsThemTheProgramIsUnchanged) {
  for (const bool overlap : {true, false})
    for (const scenario::PipelineP2p p2p : {scenario::P2P_OVERLAPPED, scenario::P2P_BLOCKING}) {
      SCOPED_TRACE(overlap ? "overlap_grad_reduce" : "reduce after the last backward");
      SCOPED_TRACE(scenario::PipelineP2p_Name(p2p));
      testing::Small s = model(overlap);
      s.execution.set_pipeline_p2p(p2p);
      if (p2p == scenario::P2P_BLOCKING) {
        s.v = 1;
        s.schedule = scenario::ZB_H1;
      }
      const schedule::ActionSchedule plain = order_of(s);
      const scenario::LoadedScenario without = with_file(s, schedule::format_schedule(plain), "plain.txt");
      const schedule::ActionSchedule placed =
          schedule::add_dp_actions(plain, shape_of(s), scenario_dp_settings(without));
      ASSERT_NE(placed, plain);
      const scenario::LoadedScenario with = with_file(s, schedule::format_schedule(placed), "placed.txt");
      testing::expect_same_program(compile(without), compile(with));
    }
}

// Rank 0's stage 2 (chunk 1) reduced at the end instead of during its last
// backward, and its parameters gathered first: the DP stream's order follows.
TEST_F(DpActionsCompile, MovedActionsMoveTheCollectives) {
  const testing::Small s = model(true);
  const scenario::LoadedScenario base = with_file(s, schedule::format_schedule(order_of(s)), "plain.txt");
  schedule::ActionSchedule moved = placed(s);
  schedule::RankActions& r0 = moved[0];
  // "0UNSHARD 2UNSHARD ...": swap the gathers.
  ASSERT_EQ(r0[0]->type, schedule::ActionType::kUnshard);
  std::swap(r0[0], r0[1]);
  // Move 2REDUCE_GRAD to the end.
  for (size_t k = 0; k < r0.size(); ++k)
    if (r0[k] && r0[k]->type == schedule::ActionType::kReduceGrad && r0[k]->stage == 2) {
      const auto a = r0[k];
      r0.erase(r0.begin() + static_cast<std::ptrdiff_t>(k));
      r0.push_back(a);
      break;
    }
  const ir::Program p0 = compile(base);
  const ir::Program p1 = compile(with_file(s, schedule::format_schedule(moved), "moved.txt"));
  const auto before = dp_stream(p0), after = dp_stream(p1);
  ASSERT_EQ(before.size(), after.size());
  // Gathers first, chunk 0's then chunk 1's by default; reversed when moved.
  ASSERT_FALSE(before.empty());
  EXPECT_EQ(before.front(), std::make_pair(0, ir::ALL_GATHER));
  EXPECT_EQ(after.front(), std::make_pair(1, ir::ALL_GATHER));
  // Reductions: chunk 1 (its backwards end first) before chunk 0 by default;
  // moved to the end, after chunk 0's.
  std::vector<int32_t> reduced_before, reduced_after;
  for (const auto& [chunk, kind] : before)
    if (kind == ir::REDUCE_SCATTER) reduced_before.push_back(chunk);
  for (const auto& [chunk, kind] : after)
    if (kind == ir::REDUCE_SCATTER) reduced_after.push_back(chunk);
  ASSERT_FALSE(reduced_before.empty());
  EXPECT_EQ(reduced_before.front(), 1);
  EXPECT_EQ(reduced_after.front(), 0);
  EXPECT_EQ(reduced_after.back(), 1);
  // Delaying a reduction cannot make the iteration shorter.
  const testing::TrivialCost cost;
  engine::Simulator s0(p0, cost), s1(p1, cost);
  EXPECT_GE(s1.run().end_time.count(), s0.run().end_time.count());
}

// Rank 0's stage 2 gathered after its first pass (a lookahead UNSHARD, with
// overlap_param_gather): the DP stream issues chunk 0's gathers at iteration
// start, then waits for the compute stream to finish that pass before chunk
// 1's; the gathers themselves are the same.
TEST_F(DpActionsCompile, ALookaheadUnshardIssuesTheGathersAfterItsPass) {
  const testing::Small s = model(true);
  schedule::ActionSchedule ahead = placed(s);
  schedule::RankActions& r0 = ahead[0];
  // "0UNSHARD 2UNSHARD 0F0 0F1 2F0 ..." → "0UNSHARD 0F0 2UNSHARD 0F1 2F0 ...".
  ASSERT_EQ(r0[1]->type, schedule::ActionType::kUnshard);
  ASSERT_EQ(r0[2]->type, schedule::ActionType::kForward);
  std::swap(r0[1], r0[2]);
  const ir::Program p0 = compile(with_file(s, schedule::format_schedule(placed(s)), "placed.txt"));
  const ir::Program p1 = compile(with_file(s, schedule::format_schedule(ahead), "ahead.txt"));
  auto dp_ops = [](const ir::Program& p) {
    std::vector<std::string> out;
    for (const ir::Stream& st : p.classes(0).streams())
      if (st.name() == "dp")
        for (const ir::Op& op : st.ops()) {
          if (op.has_collective() && op.collective().kind() == ir::ALL_GATHER)
            out.push_back("gather" + std::to_string(op.chunk()));
          if (op.has_wait()) out.push_back("wait");
        }
    return out;
  };
  const std::vector<std::string> before = dp_ops(p0), after = dp_ops(p1);
  ASSERT_GE(before.size(), 2u);
  EXPECT_EQ(before[0], "gather0");
  EXPECT_EQ(before[1], "gather1");  // both chunks' at iteration start
  EXPECT_EQ(after[0], "gather0");
  EXPECT_EQ(after[1], "wait");  // for rank 0's first pass
  EXPECT_EQ(after[2], "gather1");
  EXPECT_EQ(std::count(before.begin(), before.end(), "gather1"), std::count(after.begin(), after.end(), "gather1"));
  // Issued later, the gather cannot end the iteration sooner.
  const testing::TrivialCost cost;
  engine::Simulator s0(p0, cost), s1(p1, cost);
  EXPECT_GE(s1.run().end_time.count(), s0.run().end_time.count());
  // Rank 1's program is unchanged.
  testing::expect_same_message(p0.classes(1), p1.classes(1));
}

}  // namespace
}  // namespace lacuna::compiler
