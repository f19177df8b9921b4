// DualPipe's overlapped F&B pairs (StageBuilder::overlapped_pair): a pair's
// two passes are emitted in turns, switching at each collective, so that one
// pass's TP collective runs while the other's kernels hold the compute
// stream. Checked on a small TP 2 × PP 2 model with DualPipeV's order, against
// the same order with its pairs written apart.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <tuple>

#include "sim/compiler/class_actions.h"
#include "sim/compiler/compile.h"
#include "sim/compiler/compiler_test_support.h"
#include "sim/engine/simulator.h"
#include "sim/schedule/action.h"
#include "sim/schedule/dualpipev.h"

namespace lacuna::compiler {
namespace {

struct Compiled {
  ir::Program program;
  int64_t iteration_ns = 0;
};

class OverlappedPair : public ::testing::Test {
 protected:
  // Compiles `actions` as the scenario's schedule file and simulates it.
  Compiled run(const testing::Small& s, const schedule::ActionSchedule& actions, const std::string& name) {
    Compiled out;
    out.program = compile(files_.scenario(s, schedule::format_schedule(actions), name));
    const testing::TrivialCost cost;
    engine::Simulator sim(out.program, cost);
    out.iteration_ns = sim.run().end_time.count();
    return out;
  }

  static schedule::ActionSchedule unpaired(schedule::ActionSchedule s) {
    for (auto& rank : s)
      for (auto& a : rank)
        if (a) a->overlaps_next = false;
    return s;
  }

  testing::ScheduleFiles files_;
};

testing::Small dualpipe_model(int64_t tp) {
  testing::Small s;
  s.layers = 8;
  s.tp = tp;
  s.pp = 2;
  s.dp = 1;
  s.v = 2;
  s.global_batch = 8;
  s.micro_batch = 1;
  s.execution.set_pipeline_p2p(scenario::P2P_OVERLAPPED);
  return s;
}

// What a compute stream runs: (phase, microbatch, chunk, layer, class, role,
// FLOPs, memory change) per kernel.
using OpKey = std::tuple<int, int, int, int, int, int, double, int64_t>;
std::multiset<OpKey> compute_ops(const ir::RankClass& c) {
  std::multiset<OpKey> out;
  for (const ir::Op& op : c.streams(0).ops())
    if (op.has_compute())
      out.insert({op.phase(), op.microbatch(), op.chunk(), op.layer(), op.compute().op_class(), op.compute().role(),
                  op.compute().flops(), op.compute().memory_delta_bytes()});
  return out;
}

// Whether some forward kernel of (microbatch, chunk) comes after a backward
// kernel that itself comes after the forward's first kernel: the two passes
// are interleaved on the compute stream.
bool interleaved(const ir::RankClass& c, int mb_f, int chunk_f) {
  bool forward_started = false, backward_inside = false;
  for (const ir::Op& op : c.streams(0).ops()) {
    if (!op.has_compute()) continue;
    const bool is_forward = op.phase() == ir::FORWARD && op.microbatch() == mb_f && op.chunk() == chunk_f;
    if (is_forward && backward_inside) return true;
    if (is_forward) forward_started = true;
    if (forward_started && (op.phase() == ir::BACKWARD_INPUT || op.phase() == ir::BACKWARD_WEIGHT))
      backward_inside = true;
  }
  return false;
}

TEST_F(OverlappedPair, InterleavesThePairAtItsCollectivesAndHidesThem) {
  const testing::Small s = dualpipe_model(2);
  const schedule::ActionSchedule order = schedule::dualpipev_schedule(2, 8);
  const Compiled paired = run(s, order, "paired.txt");
  const Compiled apart = run(s, unpaired(order), "apart.txt");
  ASSERT_EQ(paired.program.classes_size(), apart.program.classes_size());
  for (int c = 0; c < paired.program.classes_size(); ++c) {
    SCOPED_TRACE("class " + std::to_string(c));
    // The same work, in another order.
    EXPECT_EQ(compute_ops(paired.program.classes(c)), compute_ops(apart.program.classes(c)));
    EXPECT_EQ(testing::total_ops(paired.program.classes(c)), testing::total_ops(apart.program.classes(c)));
  }
  // Rank 0's first pair is 0F3&3B1 (stage 0 = chunk 0, microbatch 3):
  // interleaved when paired, whole when apart.
  EXPECT_TRUE(interleaved(paired.program.classes(0), 3, 0));
  EXPECT_FALSE(interleaved(apart.program.classes(0), 3, 0));
  // Each TP all-reduce of one pass now runs under the other's kernels.
  EXPECT_LT(paired.iteration_ns, apart.iteration_ns);
}

// The compiled program read back (class_actions, V layout) is the file's
// order: written apart, action for action (its I and W split kept); paired,
// the same order once each pair's alternating pieces are joined, the
// forward's first piece first.
TEST_F(OverlappedPair, ProgramsReadBackAsTheOrderTheyWereGiven) {
  const testing::Small s = dualpipe_model(2);
  const schedule::ActionSchedule order = schedule::dualpipev_schedule(2, 8);
  const schedule::PipelineShape shape{.pp = 2, .virtual_stages = 2, .microbatches = 8,
                                      .layout = schedule::StageLayout::kV};
  for (const bool paired : {false, true}) {
    SCOPED_TRACE(paired ? "paired" : "apart");
    const Compiled c = run(s, paired ? order : unpaired(order), paired ? "paired.txt" : "apart.txt");
    for (const ir::RankBinding& b : c.program.ranks()) {
      const int32_t r = b.coord().pp();
      const StageOf stage = [&](int32_t, int32_t chunk) { return schedule::virtual_stage(shape, r, chunk); };
      schedule::RankActions got = class_actions(c.program.classes(b.class_id()), stage, {""});
      if (paired) {
        // The pairs are cut into alternating pieces; join each pass's pieces
        // at its first one.
        EXPECT_TRUE(std::any_of(got.begin(), got.end(), [](const auto& a) { return a->kernels.has_value(); }));
        schedule::RankActions joined;
        for (auto& a : got) {
          if (a->kernels && a->kernels->begin > 0) continue;
          a->kernels.reset();
          joined.push_back(a);
        }
        got = joined;
      }
      EXPECT_EQ(schedule::format_schedule({got}), schedule::format_schedule({unpaired(order)[static_cast<size_t>(r)]}))
          << "pipeline rank " << r;
    }
  }
}

// Without collectives (TP 1) there is nowhere to switch: the pair is the two
// passes in order, and the program is the one written apart, op for op.
TEST_F(OverlappedPair, WithoutCollectivesIsThePassesInOrder) {
  const testing::Small s = dualpipe_model(1);
  const schedule::ActionSchedule order = schedule::dualpipev_schedule(2, 8);
  const Compiled paired = run(s, order, "paired.txt");
  const Compiled apart = run(s, unpaired(order), "apart.txt");
  ASSERT_EQ(paired.program.classes_size(), apart.program.classes_size());
  for (int c = 0; c < paired.program.classes_size(); ++c)
    EXPECT_EQ(paired.program.classes(c).SerializeAsString(), apart.program.classes(c).SerializeAsString());
  EXPECT_EQ(paired.iteration_ns, apart.iteration_ns);
}

}  // namespace
}  // namespace lacuna::compiler
