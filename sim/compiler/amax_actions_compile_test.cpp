// A schedule file's FP8 amax actions through the stage compiler
// (docs/schedules.md#the-amax-pass): written where the amax pass places
// them, they compile to the very program the file without them gives; left
// out after a pass, that pass runs no reduction and no update.
#include <gtest/gtest.h>

#include <string>

#include "sim/compiler/compile.h"
#include "sim/compiler/compiler_test_support.h"
#include "sim/compiler/custom_schedule.h"
#include "sim/compiler/rank_layout.h"
#include "sim/core/error.h"
#include "sim/cost/cost_model.h"
#include "sim/engine/simulator.h"
#include "sim/schedule/action.h"
#include "sim/schedule/lower_amax.h"
#include "sim/schedule/lower_p2p.h"

namespace lacuna::compiler {
namespace {

// TP 2 × PP 2 × DP 2 with FP8 under delayed scaling (the default recipe).
testing::Small model(int64_t v, scenario::ScheduleKind kind, scenario::PipelineP2p p2p) {
  testing::Small s = testing::sp_small();
  s.layers = 8;
  s.v = v;
  s.schedule = kind;
  s.execution.set_pipeline_p2p(p2p);
  return s;
}

class AmaxActionsCompile : public ::testing::Test {
 protected:
  scenario::LoadedScenario with_file(const testing::Small& s, const schedule::ActionSchedule& a,
                                     const std::string& name, bool fp8 = true) {
    scenario::LoadedScenario ls = files_.scenario(s, schedule::format_schedule(a), name);
    if (fp8) {
      ls.spec.mutable_cluster()->mutable_gpu()->set_peak_fp8_tflops(1979);
      ls.spec.mutable_training()->set_precision(scenario::FP8);
    }
    return ls;
  }
  testing::ScheduleFiles files_;
};

schedule::PipelineShape shape_of(const testing::Small& s) {
  return {.pp = 2, .virtual_stages = static_cast<int32_t>(s.v), .microbatches = 4};
}

schedule::ActionSchedule order_of(const testing::Small& s) {
  const schedule::PipelineShape shape = shape_of(s);
  return schedule::to_actions(schedule::build_schedule(s.schedule, shape), shape);
}

// Forward and backward amax reductions of class `cls`, and its updates.
struct Tally {
  int64_t forward = 0, backward = 0, updates = 0;
};
Tally tally(const ir::Program& p, int cls) {
  Tally t;
  for (const auto& st : p.classes(cls).streams())
    for (const auto& op : st.ops()) {
      if (op.has_collective() && op.collective().group_slot() == kSlotAmax)
        ++(op.phase() == ir::FORWARD ? t.forward : t.backward);
      if (op.has_compute() && op.compute().role() == ir::ROLE_FP8_AMAX) ++t.updates;
    }
  return t;
}

TEST_F(AmaxActionsCompile, WrittenWhereThePassPutsThemTheProgramIsUnchanged) {
  struct Case {
    int64_t v;
    scenario::ScheduleKind kind;
    scenario::PipelineP2p p2p;
    bool written_p2p;
  };
  for (const Case c : {Case{1, scenario::ZB_H1, scenario::P2P_BLOCKING, false},
                       Case{1, scenario::ONE_F_ONE_B, scenario::P2P_BLOCKING, true},
                       Case{2, scenario::INTERLEAVED_1F1B, scenario::P2P_OVERLAPPED, false}}) {
    SCOPED_TRACE(scenario::ScheduleKind_Name(c.kind));
    const testing::Small s = model(c.v, c.kind, c.p2p);
    schedule::ActionSchedule plain = order_of(s);
    if (c.written_p2p) plain = schedule::lower_p2p(plain, c.kind, shape_of(s));
    const schedule::ActionSchedule placed = schedule::add_amax_actions(plain);
    ASSERT_NE(placed, plain);
    EXPECT_EQ(schedule::add_amax_actions(placed), placed);  // idempotent
    const ir::Program without = compile(with_file(s, plain, "plain.txt"));
    const ir::Program with = compile(with_file(s, placed, "placed.txt"));
    testing::expect_same_program(without, with);
    // ZB-H1's I passes reduce, its W passes do not: one backward reduction
    // per microbatch and chunk either way.
    for (int cls = 0; cls < with.classes_size(); ++cls) {
      const Tally t = tally(with, cls);
      EXPECT_EQ(t.forward, 4 * c.v);
      EXPECT_EQ(t.backward, 4 * c.v);
      EXPECT_EQ(t.updates, 8 * c.v);
    }
  }
}

// Rank 0's forwards keep no AMAX: its class runs no forward reduction and
// no forward update, its backwards and rank 1 are as before, and the
// iteration is no longer (a reduction the compute stream waited for is gone).
TEST_F(AmaxActionsCompile, AForwardWithoutItsAmaxRunsNone) {
  const testing::Small s = model(1, scenario::ZB_H1, scenario::P2P_BLOCKING);
  const schedule::ActionSchedule placed = schedule::add_amax_actions(order_of(s));
  schedule::ActionSchedule dropped = placed;
  schedule::RankActions kept;
  for (size_t k = 0; k < dropped[0].size(); ++k) {
    const bool after_forward = k > 0 && dropped[0][k - 1]->type == schedule::ActionType::kForward;
    if (!(dropped[0][k]->type == schedule::ActionType::kAmaxReduce && after_forward)) kept.push_back(dropped[0][k]);
  }
  dropped[0] = kept;
  const ir::Program before = compile(with_file(s, placed, "placed.txt"));
  const ir::Program after = compile(with_file(s, dropped, "dropped.txt"));
  const Tally t0 = tally(after, 0), t1 = tally(after, 1);
  EXPECT_EQ(t0.forward, 0);
  EXPECT_EQ(t0.backward, 4);
  EXPECT_EQ(t0.updates, 4);
  EXPECT_EQ(t1.forward, 4);
  EXPECT_EQ(t1.updates, 8);
  testing::expect_same_message(before.classes(1), after.classes(1));
  const auto cost = cost::make_analytic_cost_model(with_file(s, placed, "c.txt").spec.cluster(),
                                                   before.info().precision());
  EXPECT_LE(engine::Simulator(after, *cost).run().end_time, engine::Simulator(before, *cost).run().end_time);
}

// A file is refused, naming rank and step, for an AMAX in a scenario that
// reduces none, after a weight-gradient pass, of another stage, or twice.
TEST_F(AmaxActionsCompile, MisplacedAmaxIsRefused) {
  const testing::Small s = model(1, scenario::ZB_H1, scenario::P2P_BLOCKING);
  const schedule::ActionSchedule placed = schedule::add_amax_actions(order_of(s));
  auto refusal = [&](const schedule::ActionSchedule& a, bool fp8) -> std::string {
    try {
      compile(with_file(s, a, "bad.txt", fp8));
    } catch (const Error& e) {
      return e.what();
    }
    return "accepted";
  };
  EXPECT_EQ(refusal(placed, true), "accepted");
  EXPECT_NE(refusal(placed, false).find("reduces no amax"), std::string::npos);
  // After rank 1's first W (ZB-H1: "1F0 1AMAX 1I0 1AMAX ... 1W0").
  auto moved = placed;
  auto& r1 = moved[1];
  for (size_t k = 0; k < r1.size(); ++k)
    if (r1[k]->type == schedule::ActionType::kBackwardWeight) {
      r1.insert(r1.begin() + static_cast<std::ptrdiff_t>(k) + 1,
                schedule::llm_action(schedule::ActionType::kAmaxReduce, 1, -1));
      break;
    }
  const std::string w = refusal(moved, true);
  EXPECT_NE(w.find("rank 1, step"), std::string::npos) << w;
  EXPECT_NE(w.find("1AMAX follows no forward, backward or input-gradient pass of stage 1 that has no AMAX yet"),
            std::string::npos)
      << w;
  auto other = placed;
  other[0][1]->stage = 1;  // "0F0 1AMAX"
  EXPECT_NE(refusal(other, true).find("rank 0, step 1"), std::string::npos);
  auto twice = placed;
  twice[0].insert(twice[0].begin() + 2, twice[0][1]);  // "0F0 0AMAX 0AMAX"
  EXPECT_NE(refusal(twice, true).find("rank 0, step 2"), std::string::npos);
}

}  // namespace
}  // namespace lacuna::compiler
