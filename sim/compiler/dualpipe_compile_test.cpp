// DualPipe's bidirectional layout through the stage compiler
// (docs/schedules.md#dualpipe): each rank holds two whole-model stages of
// L/pp layers, a microbatch enters at rank 0 or at rank pp − 1 and never
// crosses from one pipeline into the other, and the two copies of each stage
// sum their gradients over a two-rank mirror group. Checked on a small
// TP 2 × PP 4 × DP 2 model against DualPipeV's order on the same scenario
// (one copy, stages of L/(2·pp) layers).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "sim/compiler/compile.h"
#include "sim/compiler/compiler_test_support.h"
#include "sim/compiler/custom_schedule.h"
#include "sim/compiler/rank_layout.h"
#include "sim/engine/simulator.h"
#include "sim/schedule/action.h"
#include "sim/schedule/dualpipe.h"
#include "sim/schedule/dualpipev.h"

namespace lacuna::compiler {
namespace {

class DualPipeCompile : public ::testing::Test {
 protected:
  scenario::LoadedScenario with_actions(const testing::Small& s, const schedule::ActionSchedule& actions,
                                        const std::string& name) {
    return files_.scenario(s, schedule::format_schedule(actions), name);
  }

  testing::ScheduleFiles files_;
};

// pp 4, 8 layers, 8 microbatches (global batch 16 / (micro-batch 1 × dp 2)).
testing::Small model(scenario::PipelineP2p p2p) {
  testing::Small s;
  s.layers = 8;
  s.tp = 2;
  s.pp = 4;
  s.dp = 2;
  s.v = 2;
  s.global_batch = 16;
  s.micro_batch = 1;
  s.distributed_optimizer = false;
  s.execution.set_pipeline_p2p(p2p);
  return s;
}

const ir::RankClass& class_of_stage(const ir::Program& p, int32_t pp_rank) {
  for (const ir::RankBinding& b : p.ranks())
    if (b.coord().pp() == pp_rank) return p.classes(b.class_id());
  throw std::runtime_error("no rank at pp " + std::to_string(pp_rank));
}

// Collectives on the mirror slot, in stream order: bytes of each.
std::vector<int64_t> mirror_bytes(const ir::RankClass& c) {
  std::vector<int64_t> out;
  for (const ir::Stream& s : c.streams())
    for (const ir::Op& op : s.ops())
      if (op.has_collective() && op.collective().group_slot() == kSlotPpMirror) out.push_back(op.collective().bytes());
  return out;
}

// Forward activations received per chunk (receive ops in the forward phase).
std::map<int32_t, int> forward_receives(const ir::RankClass& c) {
  std::map<int32_t, int> out;
  for (const ir::Stream& s : c.streams())
    for (const ir::Op& op : s.ops())
      if (op.has_recv() && op.phase() == ir::FORWARD && op.recv().channel() == 0) ++out[op.chunk()];
  return out;
}

TEST_F(DualPipeCompile, HoldsTwoWholeModelStagesPerRank) {
  const testing::Small s = model(scenario::P2P_OVERLAPPED);
  const ir::Program bidirectional =
      compile(with_actions(s, schedule::dualpipe_schedule(4, 8), "dualpipe.txt"));
  const ir::Program v = compile(with_actions(s, schedule::dualpipev_schedule(4, 8), "dualpipev.txt"));
  auto weights = [](const ir::Program& p, int32_t r) { return class_of_stage(p, r).memory().weights_bytes(); };
  // Ranks 1 and 2 hold layers only: 2 × 2 layers against DualPipeV's 2 × 1.
  for (int32_t r : {1, 2}) {
    SCOPED_TRACE("pp rank " + std::to_string(r));
    EXPECT_GT(weights(v, r), 0);
    EXPECT_EQ(weights(bidirectional, r), 2 * weights(v, r));
  }
  // Ranks 0 and 3 both hold an embedding and a head (each pipeline's ends)
  // and four layers: mirror images.
  EXPECT_EQ(weights(bidirectional, 0), weights(bidirectional, 3));
  EXPECT_EQ(weights(bidirectional, 0) - weights(v, 0), weights(bidirectional, 1) / 2);
}

TEST_F(DualPipeCompile, EachMicrobatchStaysInItsPipeline) {
  const ir::Program p =
      compile(with_actions(model(scenario::P2P_OVERLAPPED), schedule::dualpipe_schedule(4, 8), "dualpipe.txt"));
  // Chunk 0 of rank r is stage r of the first pipeline, chunk 1 stage
  // 3 − r of the second: the pipeline's first stage receives nothing, every
  // other one its four microbatches.
  for (int32_t r = 0; r < 4; ++r) {
    SCOPED_TRACE("pp rank " + std::to_string(r));
    std::map<int32_t, int> expected;
    if (r > 0) expected[0] = 4;
    if (r < 3) expected[1] = 4;
    EXPECT_EQ(forward_receives(class_of_stage(p, r)), expected);
  }
  // Overlapped, as the authors' runtime posts its transfers: runs to the end.
  const testing::TrivialCost cost;
  engine::Simulator sim(p, cost);
  EXPECT_GT(sim.run().end_time.count(), 0);
  // Blocking calls placed by the generic rule deadlock it, as they do
  // DualPipeV and ZB-V: refused before anything runs, in the schedule's
  // terms (schedule/call_deadlock.h).
  try {
    compile(with_actions(model(scenario::P2P_BLOCKING), schedule::dualpipe_schedule(4, 8), "blocking.txt"));
    FAIL() << "compiled a deadlocking schedule";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the blocking p2p calls deadlock"), std::string::npos) << e.what();
  }
}

// Every rank sums both of its stages with its mirror pp − 1 − r, in
// ascending model stage, so the pair's collectives match byte for byte; the
// groups are the pairs. DualPipeV's single copy has no such group.
TEST_F(DualPipeCompile, MirrorsSumTheirGradientsPairwise) {
  const testing::Small s = model(scenario::P2P_OVERLAPPED);
  const ir::Program p = compile(with_actions(s, schedule::dualpipe_schedule(4, 8), "dualpipe.txt"));
  ASSERT_GT(p.group_slots_size(), kSlotPpMirror);
  EXPECT_EQ(p.group_slots(kSlotPpMirror).kind(), ir::PP_MIRROR);
  int groups = 0;
  for (const ir::Group& g : p.groups()) {
    if (g.kind() != ir::PP_MIRROR) continue;
    ++groups;
    ASSERT_EQ(g.ranks_size(), 2);
    const auto& a = p.ranks(g.ranks(0)).coord();
    const auto& b = p.ranks(g.ranks(1)).coord();
    EXPECT_EQ(a.pp() + b.pp(), 3);
    EXPECT_EQ(a.tp(), b.tp());
    EXPECT_EQ(a.dp(), b.dp());
  }
  EXPECT_EQ(groups, 2 * 2 * 2);  // tp 2 × dp 2 × two pairs
  for (int32_t r = 0; r < 4; ++r) {
    SCOPED_TRACE("pp rank " + std::to_string(r));
    const std::vector<int64_t> mine = mirror_bytes(class_of_stage(p, r));
    ASSERT_EQ(mine.size(), 2u);
    EXPECT_EQ(mine, mirror_bytes(class_of_stage(p, 3 - r)));
    // fp32 gradients of the stage's layers (Megatron's main_grad), whole
    // without the distributed optimizer.
    const int64_t layers_bytes = class_of_stage(p, 1).memory().weights_bytes() / 2 / 2 * 4;
    if (r == 1 || r == 2) {
      EXPECT_EQ(mine[0], layers_bytes);
      EXPECT_EQ(mine[1], layers_bytes);
    }
  }
  const ir::Program v = compile(with_actions(s, schedule::dualpipev_schedule(4, 8), "dualpipev.txt"));
  for (const ir::Group& g : v.groups()) EXPECT_NE(g.kind(), ir::PP_MIRROR);
  EXPECT_TRUE(mirror_bytes(class_of_stage(v, 0)).empty());
}

// The scenario's layer split is for one pipeline of pp · v stages; DualPipe
// splits over pp and refuses a given per-stage split, naming the field.
TEST_F(DualPipeCompile, RefusesAPerStageSplit) {
  testing::Small s = model(scenario::P2P_OVERLAPPED);
  scenario::LoadedScenario ls = with_actions(s, schedule::dualpipe_schedule(4, 8), "dualpipe.txt");
  for (int k = 0; k < 8; ++k) ls.spec.mutable_parallel()->add_layers_per_stage(1);
  try {
    compile(ls);
    FAIL() << "compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("parallel.layers_per_stage"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bidirectional"), std::string::npos) << e.what();
  }
}

// The generator refuses what DualPipe's runtime refuses, naming the field.
TEST_F(DualPipeCompile, GeneratorNamesTheFieldThatBreaksIt) {
  testing::Small s = model(scenario::P2P_OVERLAPPED);
  s.pp = 3;
  s.layers = 6;
  s.global_batch = 24;  // 12 microbatches
  try {
    generate_schedule(testing::make_scenario(s), "dualpipe", "--generate");
    FAIL() << "generated for pp 3";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("even number of pipeline ranks, but pp is 3"), std::string::npos)
        << e.what();
  }
  s = model(scenario::P2P_OVERLAPPED);
  s.global_batch = 18;  // 9 microbatches
  try {
    generate_schedule(testing::make_scenario(s), "dualpipe", "--generate");
    FAIL() << "generated for 9 microbatches";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gives 9"), std::string::npos) << e.what();
  }
  s.global_batch = 16;
  EXPECT_EQ(generate_schedule(testing::make_scenario(s), "dualpipe", "--generate"), schedule::dualpipe_schedule(4, 8));
}

}  // namespace
}  // namespace lacuna::compiler
