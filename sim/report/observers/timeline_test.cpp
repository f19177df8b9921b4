// The JSON timeline (report::TimelineRecorder, timeline_json) on real engine
// runs of a small hand-built program: which ranks it keeps, that every op but
// records and waits appears once in program order, the op-class keys and the
// documented layout of the JSON text.
#include "sim/report/observers/timeline.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "sim/engine/engine_test_support.h"
#include "sim/engine/simulator.h"
#include "sim/proto/program.pb.h"
#include "sim/report/formats/names.h"
#include "sim/report/analyses/rank_spec.h"

namespace lacuna::report {
namespace {

using engine::testing::add_class;
using engine::testing::add_collective;
using engine::testing::add_compute;
using engine::testing::add_record;
using engine::testing::add_recv;
using engine::testing::add_send;
using engine::testing::add_wait;

ir::Op& set_meta(ir::Op& op, ir::Phase phase, int32_t microbatch, int32_t module = 0) {
  op.set_phase(phase);
  op.set_microbatch(microbatch);
  op.set_module(module);
  return op;
}

// Four ranks: rank r is pp stage r % 2 of data-parallel replica r / 2.
// Stage 0 ("first"):
//   compute (COMPUTE): 0 F gemm  1 record e0  2 B fixed (module 1)  3 wait e1>=1  4 opt attention
//   pp_send (PP_SEND): 0 wait e0>=1  1 send to pp_next
//   tp (TP_COMM):      0 AR on slot tp  1 record e1
//   dp (DP_COMM):      0 RS on slot dp
// Stage 1 ("last"):
//   compute (COMPUTE): 0 wait e0>=1  1 F gemm  2 B fixed
//   pp_recv (PP_RECV): 0 recv from pp_prev  1 record e0
//   dp (DP_COMM):      0 RS on slot dp
ir::Program small_program() {
  ir::Program p;
  p.mutable_info()->set_pp(2);
  p.mutable_info()->set_dp(2);
  ir::Slot* tp = p.add_group_slots();
  tp->set_name("tp");
  tp->set_kind(ir::TP);
  ir::Slot* dp = p.add_group_slots();
  dp->set_name("dp");
  dp->set_kind(ir::DP);
  p.add_peer_slots()->set_name("pp_prev");
  p.add_peer_slots()->set_name("pp_next");

  ir::RankClass* first = add_class(p, "first", 2, {"compute", "pp_send", "tp", "dp"});
  first->mutable_streams(0)->set_kind(ir::COMPUTE);
  first->mutable_streams(1)->set_kind(ir::PP_SEND);
  first->mutable_streams(2)->set_kind(ir::TP_COMM);
  first->mutable_streams(3)->set_kind(ir::DP_COMM);
  ir::Stream* s = first->mutable_streams(0);
  set_meta(add_compute(s, 0, 1000), ir::FORWARD, 0);
  add_record(s, 0);
  set_meta(add_compute(s, 700), ir::BACKWARD_INPUT, 0, 1);
  add_wait(s, 1, 1);
  ir::Op& opt = set_meta(add_compute(s, 0, 300), ir::OPTIMIZER_STEP, 3);
  opt.mutable_compute()->set_op_class(ir::ATTENTION);
  add_wait(first->mutable_streams(1), 0, 1);
  set_meta(add_send(first->mutable_streams(1), 1, 5000, 0, 1), ir::FORWARD, 0);
  add_collective(first->mutable_streams(2), ir::ALL_REDUCE, 0, 2048);
  add_record(first->mutable_streams(2), 1);
  set_meta(add_collective(first->mutable_streams(3), ir::REDUCE_SCATTER, 1, 4096), ir::DP_SYNC, 2);

  ir::RankClass* last = add_class(p, "last", 1, {"compute", "pp_recv", "dp"});
  last->mutable_streams(0)->set_kind(ir::COMPUTE);
  last->mutable_streams(1)->set_kind(ir::PP_RECV);
  last->mutable_streams(2)->set_kind(ir::DP_COMM);
  s = last->mutable_streams(0);
  add_wait(s, 0, 1);
  set_meta(add_compute(s, 0, 2000), ir::FORWARD, 0);
  set_meta(add_compute(s, 900), ir::BACKWARD_INPUT, 0);
  set_meta(add_recv(last->mutable_streams(1), 0, 5000, 0, 1), ir::FORWARD, 0);
  add_record(last->mutable_streams(1), 0);
  set_meta(add_collective(last->mutable_streams(2), ir::REDUCE_SCATTER, 1, 4096), ir::DP_SYNC, 2);

  // Groups: tp {r} for each rank (size 1), dp {stage, stage + 2}.
  for (int r = 0; r < 4; ++r) {
    ir::Group* g = p.add_groups();
    g->set_kind(ir::TP);
    g->add_ranks(r);
  }
  for (int stage = 0; stage < 2; ++stage) {
    ir::Group* g = p.add_groups();
    g->set_kind(ir::DP);
    g->add_ranks(stage);
    g->add_ranks(stage + 2);
  }
  for (int r = 0; r < 4; ++r) {
    const int stage = r % 2;
    ir::RankBinding* b = p.add_ranks();
    b->set_class_id(stage);
    b->add_group(r);          // tp
    b->add_group(4 + stage);  // dp
    b->add_peer(stage == 1 ? r - 1 : -1);  // pp_prev
    b->add_peer(stage == 0 ? r + 1 : -1);  // pp_next
    b->mutable_coord()->set_pp(stage);
    b->mutable_coord()->set_dp(r / 2);
  }
  return p;
}

struct SimRun {
  Timeline timeline;
  std::string json;
  engine::testing::RecordingObserver all;
};

SimRun simulate(const ir::Program& p, const std::string& spec, bool fold = false) {
  engine::testing::ClosedFormCost cost;
  engine::Simulator sim(p, cost, {.fold = fold});
  TimelineRecorder recorder(p, parse_rank_spec(spec));
  SimRun run;
  sim.add_observer(&recorder);
  sim.add_observer(&run.all);
  sim.run();
  run.timeline = recorder.timeline();
  run.json = timeline_json(run.timeline);
  return run;
}

std::vector<int32_t> timeline_ranks(const Timeline& t) {
  std::vector<int32_t> out;
  for (const TimelineRank& r : t.ranks) out.push_back(r.rank);
  return out;
}

TEST(Timeline, KeepsTheRanksOfTheSelectionInDisplayOrder) {
  const ir::Program p = small_program();
  EXPECT_EQ(timeline_ranks(simulate(p, "pipeline").timeline), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(timeline_ranks(simulate(p, "all").timeline), (std::vector<int32_t>{0, 2, 1, 3}));  // by pp stage
  EXPECT_EQ(timeline_ranks(simulate(p, "stage:1").timeline), (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(timeline_ranks(simulate(p, "3,0").timeline), (std::vector<int32_t>{0, 3}));
  for (const char* spec : {"pipeline", "all", "stage:1", "3,0"}) {
    EXPECT_EQ(timeline_ranks(simulate(p, spec).timeline), select_ranks(parse_rank_spec(spec), p)) << spec;
  }
  EXPECT_EQ(simulate(p, "stage:1").timeline.selection, "stage:1");
}

TEST(Timeline, FoldedRunKeepsOnlySimulatedRanks) {
  const ir::Program p = small_program();
  const SimRun run = simulate(p, "all", /*fold=*/true);
  std::set<int32_t> simulated(run.all.simulated.begin(), run.all.simulated.end());
  const std::vector<int32_t> kept = timeline_ranks(run.timeline);
  EXPECT_EQ(kept.size(), simulated.size());
  for (int32_t r : kept) EXPECT_TRUE(simulated.count(r)) << r;
  EXPECT_EQ(std::set<int32_t>(kept.begin(), kept.end()).size(), kept.size());  // no duplicates
}

TEST(Timeline, EveryOpButRecordsAndWaitsAppearsOnceInProgramOrder) {
  const ir::Program p = small_program();
  const SimRun run = simulate(p, "all");
  ASSERT_EQ(run.timeline.ranks.size(), 4u);
  for (const TimelineRank& tr : run.timeline.ranks) {
    SCOPED_TRACE("rank " + std::to_string(tr.rank));
    EXPECT_EQ(tr.label, rank_label(p, tr.rank));
    const ir::RankClass& cls = p.classes(p.ranks(tr.rank).class_id());
    ASSERT_EQ(tr.streams.size(), static_cast<std::size_t>(cls.streams_size()));
    for (std::size_t si = 0; si < tr.streams.size(); ++si) {
      const TimelineStream& ts = tr.streams[si];
      const ir::Stream& stream = cls.streams(static_cast<int>(si));
      EXPECT_EQ(ts.stream, static_cast<int32_t>(si));
      EXPECT_EQ(ts.name, stream.name());
      std::vector<int32_t> expected;
      for (int i = 0; i < stream.ops_size(); ++i) {
        if (!stream.ops(i).has_record() && !stream.ops(i).has_wait()) expected.push_back(i);
      }
      std::vector<int32_t> got;
      for (const TimelineOp& o : ts.ops) got.push_back(o.op);
      EXPECT_EQ(got, expected) << "stream " << ts.name;
      for (const TimelineOp& o : ts.ops) {
        const ir::Op& op = stream.ops(o.op);
        const engine::OpSpan* span = run.all.find(tr.rank, static_cast<int32_t>(si), o.op);
        ASSERT_NE(span, nullptr);
        EXPECT_EQ(o.ready_ns, span->ready.count());
        EXPECT_EQ(o.start_ns, span->start.count());
        EXPECT_EQ(o.end_ns, span->end.count());
        EXPECT_EQ(o.phase, static_cast<int32_t>(op.phase()));
        EXPECT_EQ(o.module, op.module());
        // Microbatches only for F / B / W / recompute ops.
        const bool per_microbatch = op.phase() >= ir::FORWARD && op.phase() <= ir::RECOMPUTE;
        EXPECT_EQ(o.microbatch, per_microbatch ? op.microbatch() : -1);
      }
    }
  }
  // Stream kinds are the lower-case enum names.
  EXPECT_EQ(run.timeline.ranks[0].streams[0].kind, "compute");
  EXPECT_EQ(run.timeline.ranks[0].streams[1].kind, "pp_send");
  EXPECT_EQ(run.timeline.ranks[0].streams[2].kind, "tp_comm");
  EXPECT_EQ(run.timeline.ranks[0].streams[3].kind, "dp_comm");
}

TEST(Timeline, ClassesAreSortedUniqueAndIndexedByEveryOp) {
  const ir::Program p = small_program();
  const SimRun run = simulate(p, "all");
  const std::vector<std::string>& classes = run.timeline.classes;
  EXPECT_TRUE(std::is_sorted(classes.begin(), classes.end()));
  EXPECT_EQ(std::set<std::string>(classes.begin(), classes.end()).size(), classes.size());
  EXPECT_EQ(classes, (std::vector<std::string>{"collective AR tp", "collective RS dp", "compute attention",
                                               "compute fixed", "compute gemm", "recv pp", "send pp"}));
  std::set<int32_t> used;
  for (const TimelineRank& tr : run.timeline.ranks) {
    const ir::RankClass& cls = p.classes(p.ranks(tr.rank).class_id());
    for (const TimelineStream& ts : tr.streams) {
      for (const TimelineOp& o : ts.ops) {
        ASSERT_GE(o.class_index, 0);
        ASSERT_LT(o.class_index, static_cast<int32_t>(classes.size()));
        const ir::Stream& stream = cls.streams(ts.stream);
        EXPECT_EQ(classes[static_cast<std::size_t>(o.class_index)], op_class_key(p, stream, stream.ops(o.op)))
            << "rank " << tr.rank << " stream " << ts.name << " op " << o.op;
        used.insert(o.class_index);
      }
    }
  }
  EXPECT_EQ(used.size(), classes.size());  // no class without an op
}

TEST(Timeline, OpClassKeysNameComputeFixedCollectiveSendAndRecv) {
  const ir::Program p = small_program();
  const ir::RankClass& first = p.classes(0);
  const ir::RankClass& last = p.classes(1);
  EXPECT_EQ(op_class_key(p, first.streams(0), first.streams(0).ops(0)), "compute gemm");
  EXPECT_EQ(op_class_key(p, first.streams(0), first.streams(0).ops(2)), "compute fixed");
  EXPECT_EQ(op_class_key(p, first.streams(0), first.streams(0).ops(4)), "compute attention");
  EXPECT_EQ(op_class_key(p, first.streams(1), first.streams(1).ops(1)), "send pp");
  EXPECT_EQ(op_class_key(p, first.streams(2), first.streams(2).ops(0)), "collective AR tp");
  EXPECT_EQ(op_class_key(p, first.streams(3), first.streams(3).ops(0)), "collective RS dp");
  EXPECT_EQ(op_class_key(p, last.streams(1), last.streams(1).ops(0)), "recv pp");

  // The suffix follows comm_kind(): a send on a TP stream is TP; a collective
  // whose slot has no kind falls back to its stream, and to dp on a stream of
  // no kind.
  ir::Program q = p;
  q.add_group_slots()->set_name("unkinded");  // slot 2
  ir::Stream tp_stream;
  tp_stream.set_kind(ir::TP_COMM);
  ir::Stream plain;
  ir::Op send;
  send.mutable_send()->set_peer_slot(1);
  EXPECT_EQ(op_class_key(q, tp_stream, send), "send tp");
  ir::Op recv;
  recv.mutable_recv()->set_peer_slot(0);
  EXPECT_EQ(op_class_key(q, plain, recv), "recv pp");
  ir::Op ag;
  ag.mutable_collective()->set_kind(ir::ALL_GATHER);
  ag.mutable_collective()->set_group_slot(2);
  EXPECT_EQ(op_class_key(q, tp_stream, ag), "collective AG tp");
  EXPECT_EQ(op_class_key(q, plain, ag), "collective AG dp");
}

TEST(Timeline, JsonFollowsTheDocumentedLayout) {
  const ir::Program p = small_program();
  const SimRun run = simulate(p, "pipeline");
  const nlohmann::json j = nlohmann::json::parse(run.json);  // throws if the text is not JSON
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j.at("selection"), "pipeline");
  EXPECT_EQ(j.at("classes").get<std::vector<std::string>>(), run.timeline.classes);
  const nlohmann::json& ranks = j.at("ranks");
  ASSERT_TRUE(ranks.is_array());
  ASSERT_EQ(ranks.size(), run.timeline.ranks.size());
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const TimelineRank& tr = run.timeline.ranks[i];
    const nlohmann::json& jr = ranks[i];
    EXPECT_EQ(jr.at("rank"), tr.rank);
    EXPECT_EQ(jr.at("label"), tr.label);
    ASSERT_EQ(jr.at("streams").size(), tr.streams.size());
    for (std::size_t s = 0; s < tr.streams.size(); ++s) {
      const TimelineStream& ts = tr.streams[s];
      const nlohmann::json& js = jr.at("streams")[s];
      EXPECT_EQ(js.at("stream"), ts.stream);
      EXPECT_EQ(js.at("name"), ts.name);
      EXPECT_EQ(js.at("kind"), ts.kind);
      ASSERT_EQ(js.at("ops").size(), ts.ops.size());
      for (std::size_t k = 0; k < ts.ops.size(); ++k) {
        const TimelineOp& o = ts.ops[k];
        // [op, class, phase, microbatch, module, ready_ns, start_ns, end_ns]
        const std::vector<int64_t> expected = {o.op,     o.class_index, o.phase,    o.microbatch,
                                               o.module, o.ready_ns,    o.start_ns, o.end_ns};
        EXPECT_EQ(js.at("ops")[k].get<std::vector<int64_t>>(), expected)
            << "rank " << tr.rank << " stream " << ts.name << " op " << o.op;
      }
    }
  }
}

TEST(Timeline, JsonOfAnEmptySelectionParses) {
  Timeline t;
  t.selection = "3";
  const nlohmann::json j = nlohmann::json::parse(timeline_json(t));
  EXPECT_EQ(j.at("selection"), "3");
  EXPECT_TRUE(j.at("classes").empty());
  EXPECT_TRUE(j.at("ranks").empty());
}

TEST(Timeline, TwoRunsGiveIdenticalJson) {
  const ir::Program p = small_program();
  for (const char* spec : {"pipeline", "all"}) {
    EXPECT_EQ(simulate(p, spec).json, simulate(p, spec).json) << spec;
  }
}

}  // namespace
}  // namespace lacuna::report
