// A schedule file's R actions through the stage compiler
// (docs/schedules.md#recompute-actions): "R&B" compiles to the very program
// the file without it gives (Megatron-LM's recompute inside the backward);
// a lone R runs the re-forward as a pass of its own where it stands, its
// backward then without it.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "sim/compiler/compile.h"
#include "sim/compiler/compiler_test_support.h"
#include "sim/core/error.h"
#include "sim/engine/simulator.h"
#include "sim/schedule/action.h"
#include "sim/schedule/lower_recompute.h"

namespace lacuna::compiler {
namespace {

// TP 2 × PP 2 × DP 2, full recompute, four microbatches.
testing::Small model(scenario::ScheduleKind kind) {
  testing::Small s;
  s.layers = 8;
  s.global_batch = 16;
  s.micro_batch = 2;
  s.schedule = kind;
  s.v = kind == scenario::INTERLEAVED_1F1B ? 2 : 1;
  s.recompute = scenario::RECOMPUTE_FULL;
  s.execution.set_pipeline_p2p(scenario::P2P_OVERLAPPED);
  return s;
}

schedule::PipelineShape shape_of(const testing::Small& s) {
  return {.pp = 2, .virtual_stages = static_cast<int32_t>(s.v), .microbatches = 4};
}

schedule::ActionSchedule order_of(const testing::Small& s) {
  return schedule::to_actions(schedule::build_schedule(s.schedule, shape_of(s)), shape_of(s));
}

const ir::Stream& compute_stream(const ir::RankClass& c) {
  const ir::Stream* s = testing::find_stream(c, "compute");
  if (s == nullptr) throw std::runtime_error("no compute stream");
  return *s;
}

// The compute stream's running memory: at its highest, and at its end.
struct Memory {
  int64_t peak = 0, net = 0;
};
Memory memory_of(const ir::RankClass& c) {
  Memory m;
  for (const ir::Op& op : compute_stream(c).ops())
    if (op.has_compute()) m.peak = std::max(m.peak, m.net += op.compute().memory_delta_bytes());
  return m;
}

struct Kernels {
  int64_t count = 0;
  double flops = 0;
};
Kernels kernels_of(const ir::RankClass& c, ir::Phase phase) {
  Kernels k;
  for (const ir::Op& op : compute_stream(c).ops())
    if (op.has_compute() && op.phase() == phase) {
      ++k.count;
      k.flops += op.compute().flops();
    }
  return k;
}

class RecomputeActionsCompile : public ::testing::Test {
 protected:
  testing::ScheduleFiles files_;
};

TEST_F(RecomputeActionsCompile, InterleavedWithItsBackwardTheProgramIsUnchanged) {
  for (const scenario::ScheduleKind kind :
       {scenario::ONE_F_ONE_B, scenario::GPIPE, scenario::ZB_H1, scenario::INTERLEAVED_1F1B}) {
    SCOPED_TRACE(scenario::ScheduleKind_Name(kind));
    const testing::Small s = model(kind);
    const schedule::ActionSchedule plain = order_of(s);
    const schedule::ActionSchedule paired = schedule::add_recompute_actions(plain);
    ASSERT_NE(paired, plain);
    testing::expect_same_program(compile(files_.scenario(s, schedule::format_schedule(plain), "plain.txt")),
                                 compile(files_.scenario(s, schedule::format_schedule(paired), "paired.txt")));
  }
}

// Rank 0 of a GPipe pipeline recomputes every microbatch right after its
// forwards (while it waits for the first gradient): the same recompute
// kernels, each microbatch's before any of its backward's, more activation
// memory held at once, and a shorter iteration.
TEST_F(RecomputeActionsCompile, ALoneRecomputeRunsAheadOfItsBackward) {
  const testing::Small s = model(scenario::GPIPE);
  const schedule::ActionSchedule paired = schedule::add_recompute_actions(order_of(s));
  schedule::ActionSchedule ahead = paired;
  schedule::RankActions& r0 = ahead[0];
  // "0F0 0F1 0F2 0F3 0R0&0B0 ..." → "0F0 .. 0F3 0R0 0R1 0R2 0R3 0B0 ...".
  schedule::RankActions moved;
  for (const auto& a : r0)
    if (a->type == schedule::ActionType::kForward) moved.push_back(a);
  for (const auto& a : r0)
    if (a->type == schedule::ActionType::kRecompute) {
      moved.push_back(a);
      moved.back()->overlaps_next = false;
    }
  for (const auto& a : r0)
    if (a->type == schedule::ActionType::kBackward) moved.push_back(a);
  r0 = moved;
  const ir::Program p_paired = compile(files_.scenario(s, schedule::format_schedule(paired), "paired.txt"));
  const ir::Program p_ahead = compile(files_.scenario(s, schedule::format_schedule(ahead), "ahead.txt"));
  const ir::RankClass& c_paired = p_paired.classes(0);
  const ir::RankClass& c_ahead = p_ahead.classes(0);
  ASSERT_EQ(c_ahead.name(), "pp0");
  // Rank 1's program is untouched.
  testing::expect_same_message(p_paired.classes(1), p_ahead.classes(1));
  const Kernels rp = kernels_of(c_paired, ir::RECOMPUTE), ra = kernels_of(c_ahead, ir::RECOMPUTE);
  EXPECT_GT(rp.count, 0);
  EXPECT_EQ(ra.count, rp.count);
  EXPECT_DOUBLE_EQ(ra.flops, rp.flops);
  EXPECT_EQ(kernels_of(c_ahead, ir::BACKWARD_INPUT).count, kernels_of(c_paired, ir::BACKWARD_INPUT).count);
  // Every recompute kernel comes before the first backward kernel.
  int32_t last_recompute = -1, first_backward = -1;
  const ir::Stream& cs = compute_stream(c_ahead);
  for (int32_t i = 0; i < cs.ops_size(); ++i) {
    if (!cs.ops(i).has_compute()) continue;
    if (cs.ops(i).phase() == ir::RECOMPUTE) last_recompute = i;
    if (cs.ops(i).phase() == ir::BACKWARD_INPUT && first_backward < 0) first_backward = i;
  }
  EXPECT_LT(last_recompute, first_backward);
  // The memory the re-forwards re-materialise is held for all four at once.
  const Memory m_ahead = memory_of(c_ahead), m_paired = memory_of(c_paired);
  EXPECT_GT(m_ahead.peak, m_paired.peak);
  // What the compute stream freed is what it took: the iteration ends even.
  EXPECT_EQ(m_ahead.net, m_paired.net);
  // Rank 0's recomputes ran while it waited for gradients.
  const testing::TrivialCost cost;
  engine::Simulator sim_paired(p_paired, cost), sim_ahead(p_ahead, cost);
  EXPECT_LT(sim_ahead.run().end_time.count(), sim_paired.run().end_time.count());
}

TEST_F(RecomputeActionsCompile, RefusedWhenTheScenarioDoesNotRecomputeLayers) {
  testing::Small s = model(scenario::ONE_F_ONE_B);
  s.recompute = scenario::RECOMPUTE_SELECTIVE;
  const std::string text = schedule::format_schedule(schedule::add_recompute_actions(order_of(s)));
  try {
    compile(files_.scenario(s, text, "sched.txt"));
    FAIL() << "compiled";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("sched.txt"), std::string::npos) << what;
    EXPECT_NE(what.find("rank 0, step 2: 0R0 recomputes whole layers, but the scenario's parallel.recompute is "
                        "RECOMPUTE_SELECTIVE"),
              std::string::npos)
        << what;
  }
}

}  // namespace
}  // namespace lacuna::compiler
