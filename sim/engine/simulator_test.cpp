#include "sim/engine/simulator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "sim/engine/engine_test_support.h"
#include "sim/engine/pipeline_program.h"

namespace lacuna::engine {
namespace {

using testing::add_class;
using testing::add_collective;
using testing::add_compute;
using testing::add_group;
using testing::add_rank;
using testing::add_record;
using testing::add_recv;
using testing::add_send;
using testing::add_wait;
using testing::ClosedFormCost;
using testing::RecordingObserver;
using ::testing::HasSubstr;

ir::Program one_rank_program() {
  ir::Program p;
  add_class(p, "solo", 2, {"compute", "side"});
  add_rank(p, 0);
  return p;
}

TEST(Simulator, StreamRunsOpsInOrder) {
  ir::Program p = one_rank_program();
  auto* s = p.mutable_classes(0)->mutable_streams(0);
  add_compute(s, 10);
  add_compute(s, 20);
  add_compute(s, 30);
  ClosedFormCost cost;
  Simulator sim(p, cost);
  RecordingObserver obs;
  sim.add_observer(&obs);
  const SimulationResult r = sim.run();
  EXPECT_EQ(r.end_time, TimeNs(60));
  EXPECT_EQ(r.ops, 3u);
  ASSERT_EQ(obs.spans.size(), 3u);
  const int64_t ends[] = {10, 30, 60};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(obs.spans[i].op, i);
    EXPECT_EQ(obs.spans[i].end, TimeNs(ends[i]));
    EXPECT_EQ(obs.spans[i].ready, obs.spans[i].start);
    EXPECT_EQ(obs.spans[i].ir, &p.classes(0).streams(0).ops(i));
    if (i > 0) {
      EXPECT_EQ(obs.spans[i].ready, obs.spans[i - 1].end);
    }
  }
  EXPECT_EQ(obs.run_end, TimeNs(60));
}

TEST(Simulator, ComputeDurationComesFromCostModelUnlessFixed) {
  ir::Program p = one_rank_program();
  auto* s = p.mutable_classes(0)->mutable_streams(0);
  add_compute(s, 0, 123.0);  // cost model: flops ns
  add_compute(s, 50, 1e6);   // fixed wins
  ClosedFormCost cost;
  Simulator sim(p, cost);
  EXPECT_EQ(sim.run().end_time, TimeNs(173));
  EXPECT_EQ(cost.compute_calls, 1);
}

TEST(Simulator, StreamsOfOneRankRunConcurrently) {
  ir::Program p = one_rank_program();
  add_compute(p.mutable_classes(0)->mutable_streams(0), 100);
  add_compute(p.mutable_classes(0)->mutable_streams(1), 70);
  ClosedFormCost cost;
  Simulator sim(p, cost);
  EXPECT_EQ(sim.run().end_time, TimeNs(100));
}

TEST(Simulator, WaitBlocksUntilRecordAndReportsCause) {
  ir::Program p = one_rank_program();
  auto* a = p.mutable_classes(0)->mutable_streams(0);
  auto* b = p.mutable_classes(0)->mutable_streams(1);
  add_compute(a, 40);
  add_compute(a, 60);
  add_record(a, 0);  // a: op 2, recorded at 100
  add_wait(b, 0, 1);
  add_compute(b, 5);
  add_compute(b, 300);
  add_wait(b, 0, 1);  // already satisfied at 305
  ClosedFormCost cost;
  Simulator sim(p, cost);
  RecordingObserver obs;
  sim.add_observer(&obs);
  EXPECT_EQ(sim.run().end_time, TimeNs(405));
  const OpSpan* compute_b = obs.find(0, 1, 1);
  ASSERT_NE(compute_b, nullptr);
  EXPECT_EQ(compute_b->start, TimeNs(100));
  ASSERT_EQ(obs.waits.size(), 2u);
  const auto& first = obs.waits[0];
  EXPECT_EQ(first.span.op, 0);
  EXPECT_EQ(first.span.ready, TimeNs(0));
  EXPECT_EQ(first.span.end, TimeNs(100));
  EXPECT_TRUE(first.cause.valid);
  EXPECT_EQ(first.cause.stream, 0);
  EXPECT_EQ(first.cause.op, 1);
  EXPECT_EQ(first.cause.start, TimeNs(40));
  EXPECT_EQ(first.cause.end, TimeNs(100));
  EXPECT_FALSE(obs.waits[1].cause.valid);
  EXPECT_EQ(obs.waits[1].span.end, TimeNs(405));
}

TEST(Simulator, WaitNeedsTheCounterToReachItsValue) {
  ir::Program p = one_rank_program();
  auto* a = p.mutable_classes(0)->mutable_streams(0);
  auto* b = p.mutable_classes(0)->mutable_streams(1);
  for (int i = 0; i < 3; ++i) {
    add_compute(a, 10);
    add_record(a, 1);
  }
  add_wait(b, 1, 3);
  add_compute(b, 1);
  ClosedFormCost cost;
  Simulator sim(p, cost);
  EXPECT_EQ(sim.run().end_time, TimeNs(31));
}

// Three ranks arrive at an all-reduce at 10, 20, 30: it starts at 30 and ends
// for all of them together.
TEST(Simulator, CollectiveStartsAtLastArrivalAndEndsTogether) {
  ir::Program p;
  p.add_group_slots()->set_name("world");
  const int32_t g = add_group(p, ir::WORLD, {0, 1, 2});
  for (int r = 0; r < 3; ++r) {
    auto* c = add_class(p, "r" + std::to_string(r), 0, {"main"});
    add_compute(c->mutable_streams(0), 10 * (r + 1));
    add_collective(c->mutable_streams(0), ir::ALL_REDUCE, 0, 1000, 5);
    add_rank(p, r, {g});
  }
  ClosedFormCost cost;
  Simulator sim(p, cost);
  RecordingObserver obs;
  sim.add_observer(&obs);
  EXPECT_EQ(sim.run().end_time, TimeNs(35));
  for (int r = 0; r < 3; ++r) {
    const OpSpan* s = obs.find(r, 0, 1);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->ready, TimeNs(10 * (r + 1)));
    EXPECT_EQ(s->start, TimeNs(30));
    EXPECT_EQ(s->end, TimeNs(35));
  }
  EXPECT_EQ(cost.collective_calls, 0);  // fixed duration
}

// on_collective: once per instance, after its members' on_op_end, members in
// arrival order (the last one started it: start = its issued).
TEST(Simulator, OnCollectiveListsMembersInArrivalOrder) {
  ir::Program p;
  p.add_group_slots()->set_name("world");
  const int32_t g = add_group(p, ir::WORLD, {0, 1, 2});
  const int64_t compute[] = {30, 10, 20};  // arrival order 1, 2, 0
  for (int r = 0; r < 3; ++r) {
    auto* c = add_class(p, "r" + std::to_string(r), 0, {"main"});
    add_compute(c->mutable_streams(0), compute[r]);
    add_collective(c->mutable_streams(0), ir::ALL_REDUCE, 0, 1000, 5);
    add_compute(c->mutable_streams(0), 1);
    add_collective(c->mutable_streams(0), ir::ALL_REDUCE, 0, 1000, 5);
    add_rank(p, r, {g});
  }
  ClosedFormCost cost;
  Simulator sim(p, cost);
  RecordingObserver obs;
  sim.add_observer(&obs);
  sim.run();
  EXPECT_EQ(obs.compute_slots, 0);
  ASSERT_EQ(obs.collectives.size(), 2u);
  const auto& first = obs.collectives[0];
  EXPECT_EQ(first.group, g);
  EXPECT_EQ(first.seq, 0u);
  ASSERT_EQ(first.members.size(), 3u);
  EXPECT_EQ(first.members[0].rank, 1);
  EXPECT_EQ(first.members[1].rank, 2);
  EXPECT_EQ(first.members[2].rank, 0);
  EXPECT_EQ(first.members[2].issued, TimeNs(30));
  for (const OpSpan& m : first.members) {
    EXPECT_EQ(m.op, 1);
    EXPECT_EQ(m.start, TimeNs(30));
    EXPECT_EQ(m.end, TimeNs(35));
  }
  EXPECT_EQ(obs.collectives[1].seq, 1u);
  // Reported after the members' on_op_end: the members' spans are all there.
  for (const OpSpan& m : obs.collectives[1].members) EXPECT_NE(obs.find(m.rank, 0, 3), nullptr);
}

TEST(Simulator, CollectiveCostUsesGroupShapeAndIsMemoized) {
  ir::Program p;
  p.add_group_slots()->set_name("world");
  const int32_t g = add_group(p, ir::WORLD, {0, 1, 2, 3});
  auto* c = add_class(p, "all", 0, {"main"});
  add_collective(c->mutable_streams(0), ir::ALL_GATHER, 0, 5000);
  add_collective(c->mutable_streams(0), ir::ALL_GATHER, 0, 5000);
  for (int r = 0; r < 4; ++r) add_rank(p, 0, {g}, {}, /*node=*/r < 3 ? 0 : 1);
  ClosedFormCost cost;
  Simulator sim(p, cost);
  // size 4, 2 nodes, at most 3 ranks on one node.
  const int64_t one = 5000 + 4000 + 100000 + 21 + ir::ALL_GATHER;
  EXPECT_EQ(sim.run().end_time, TimeNs(2 * one));
  EXPECT_EQ(cost.collective_calls, 1);
}

TEST(Simulator, CollectivesOnOneGroupMatchInIssueOrderAcrossSlots) {
  // Slots "dp" and "dp_cp" name the same group: matching is per group.
  ir::Program p;
  p.add_group_slots()->set_name("dp");
  p.add_group_slots()->set_name("dp_cp");
  const int32_t g = add_group(p, ir::DP, {0, 1});
  auto* a = add_class(p, "a", 0, {"main"});
  add_collective(a->mutable_streams(0), ir::ALL_REDUCE, 0, 10, 100);
  add_collective(a->mutable_streams(0), ir::REDUCE_SCATTER, 1, 20, 100);
  auto* b = add_class(p, "b", 0, {"main"});
  add_collective(b->mutable_streams(0), ir::ALL_REDUCE, 1, 10, 100);
  add_collective(b->mutable_streams(0), ir::REDUCE_SCATTER, 0, 20, 100);
  add_rank(p, 0, {g, g});
  add_rank(p, 1, {g, g});
  ClosedFormCost cost;
  Simulator sim(p, cost);
  EXPECT_EQ(sim.run().end_time, TimeNs(200));
}

ir::Program two_rank_p2p(int64_t sender_compute, std::vector<int64_t> send_tags, std::vector<int64_t> recv_tags,
                         int32_t sender_node = 0) {
  ir::Program p;
  p.add_peer_slots()->set_name("peer");
  auto* s = add_class(p, "sender", 0, {"compute", "send"});
  add_compute(s->mutable_streams(0), sender_compute);
  for (int64_t t : send_tags) add_send(s->mutable_streams(1), 0, 1000, 0, t);
  auto* r = add_class(p, "receiver", 0, {"recv"});
  for (int64_t t : recv_tags) add_recv(r->mutable_streams(0), 0, 1000, 0, t);
  add_rank(p, 0, {}, {1}, sender_node);
  add_rank(p, 1, {}, {0}, 0);
  return p;
}

TEST(Simulator, P2PIsRendezvousAndEndsTogether) {
  ir::Program p;
  p.add_peer_slots()->set_name("peer");
  auto* s = add_class(p, "sender", 0, {"main"});
  add_compute(s->mutable_streams(0), 100);
  add_send(s->mutable_streams(0), 0, 1000, 0, 7);
  auto* r = add_class(p, "receiver", 0, {"main"});
  add_recv(r->mutable_streams(0), 0, 1000, 0, 7);
  add_rank(p, 0, {}, {1}, 0);
  add_rank(p, 1, {}, {0}, 1);  // other node
  ClosedFormCost cost;
  Simulator sim(p, cost);
  RecordingObserver obs;
  sim.add_observer(&obs);
  const int64_t transfer = 1000 / 10 + 5000;
  EXPECT_EQ(sim.run().end_time, TimeNs(100 + transfer));
  ASSERT_EQ(obs.transfers.size(), 1u);
  const auto& [send, recv] = obs.transfers[0];
  EXPECT_EQ(send.rank, 0);
  EXPECT_EQ(recv.rank, 1);
  EXPECT_EQ(recv.ready, TimeNs(0));
  EXPECT_EQ(recv.start, TimeNs(100));
  EXPECT_EQ(send.start, TimeNs(100));
  EXPECT_EQ(send.end, recv.end);
  EXPECT_EQ(recv.end, TimeNs(100 + transfer));
  // on_transfer comes after both on_op_end.
  EXPECT_NE(obs.find(0, 0, 1), nullptr);
  EXPECT_NE(obs.find(1, 0, 0), nullptr);
}

TEST(Simulator, P2PWithinNodeUsesSameNodeCost) {
  ir::Program p = two_rank_p2p(0, {1}, {1});
  ClosedFormCost cost;
  Simulator sim(p, cost);
  EXPECT_EQ(sim.run().end_time, TimeNs(100));
}

TEST(Simulator, P2PMatchesInOrderPerChannel) {
  // Two channels between the same pair, received in the opposite order of
  // posting: separate FIFOs, so no mismatch.
  ir::Program p;
  p.add_peer_slots()->set_name("peer");
  auto* s = add_class(p, "sender", 0, {"a", "b"});
  add_send(s->mutable_streams(0), 0, 10, 0, 100, 50);
  add_send(s->mutable_streams(1), 0, 10, 1, 200, 50);
  auto* r = add_class(p, "receiver", 0, {"main"});
  add_recv(r->mutable_streams(0), 0, 10, 1, 200);
  add_recv(r->mutable_streams(0), 0, 10, 0, 100);
  add_rank(p, 0, {}, {1});
  add_rank(p, 1, {}, {0});
  ClosedFormCost cost;
  Simulator sim(p, cost);
  EXPECT_EQ(sim.run().end_time, TimeNs(100));
}

TEST(Simulator, P2PTagMismatchNamesBothSides) {
  ir::Program p = two_rank_p2p(0, {1, 2}, {2, 1});
  ClosedFormCost cost;
  Simulator sim(p, cost);
  try {
    sim.run();
    FAIL() << "expected a tag mismatch";
  } catch (const DeadlockError&) {
    FAIL() << "mismatch reported as deadlock";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("rank 0 stream send op 0"));
    EXPECT_THAT(e.what(), HasSubstr("rank 1 stream recv op 0"));
    EXPECT_THAT(e.what(), HasSubstr("tag 1"));
    EXPECT_THAT(e.what(), HasSubstr("tag 2"));
  }
}

TEST(Simulator, CollectiveKindOrBytesMismatchIsAnError) {
  for (bool kind_differs : {true, false}) {
    ir::Program p;
    p.add_group_slots()->set_name("tp");
    const int32_t g = add_group(p, ir::TP, {0, 1});
    auto* a = add_class(p, "a", 0, {"tp_comm"});
    add_collective(a->mutable_streams(0), ir::ALL_REDUCE, 0, 100);
    auto* b = add_class(p, "b", 0, {"tp_comm"});
    add_collective(b->mutable_streams(0), kind_differs ? ir::ALL_GATHER : ir::ALL_REDUCE, 0,
                   kind_differs ? 100 : 200);
    add_rank(p, 0, {g});
    add_rank(p, 1, {g});
    ClosedFormCost cost;
    Simulator sim(p, cost);
    try {
      sim.run();
      FAIL() << "expected a mismatch";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("group 0 (tp)"));
      EXPECT_THAT(e.what(), HasSubstr("rank 0 stream tp_comm op 0"));
      EXPECT_THAT(e.what(), HasSubstr("rank 1 stream tp_comm op 0"));
      EXPECT_THAT(e.what(), HasSubstr(kind_differs ? "ALL_GATHER" : "200 bytes"));
    }
  }
}

TEST(Simulator, ComputeTimeScaleSlowsOneRankAndDelaysPartners) {
  ir::Program p;
  p.add_group_slots()->set_name("tp");
  const int32_t g = add_group(p, ir::TP, {0, 1});
  auto* c = add_class(p, "same", 0, {"main"});
  add_compute(c->mutable_streams(0), 100);
  add_collective(c->mutable_streams(0), ir::ALL_REDUCE, 0, 0, 10);
  add_compute(c->mutable_streams(0), 100);
  add_rank(p, 0, {g});
  add_rank(p, 0, {g}, {}, 0, 1.5);
  ClosedFormCost cost;
  Simulator sim(p, cost);
  RecordingObserver obs;
  sim.add_observer(&obs);
  EXPECT_EQ(sim.run().end_time, TimeNs(150 + 10 + 150));
  EXPECT_EQ(obs.find(0, 0, 1)->start, TimeNs(150));  // rank 0 waits for slow rank 1
  EXPECT_EQ(obs.find(0, 0, 2)->end, TimeNs(260));
  EXPECT_EQ(obs.find(1, 0, 2)->end, TimeNs(310));
}

TEST(Simulator, NegativeCostIsAnError) {
  struct NegativeCost : ClosedFormCost {
    TimeNs compute(const ir::Compute&) const override { return TimeNs(-1); }
  } cost;
  ir::Program p = one_rank_program();
  add_compute(p.mutable_classes(0)->mutable_streams(0), 0, 10);
  EXPECT_THROW(Simulator(p, cost), Error);
}

TEST(Simulator, ObserversSeeEveryOpOnceAndRunsAreRepeatable) {
  testing::PipelineSpec spec;
  const ir::Program p = make_pipeline_program(spec);
  int64_t ops_per_run = 0;
  for (const auto& b : p.ranks()) {
    for (const auto& s : p.classes(b.class_id()).streams()) ops_per_run += s.ops_size();
  }
  ClosedFormCost cost;
  Simulator sim(p, cost);
  RecordingObserver obs;
  sim.add_observer(&obs);
  const SimulationResult first = sim.run();
  const std::vector<OpSpan> first_spans = obs.spans;
  EXPECT_EQ(static_cast<int64_t>(first_spans.size()), ops_per_run);
  EXPECT_EQ(static_cast<int64_t>(first.ops), ops_per_run);
  std::map<std::tuple<int32_t, int32_t, int32_t>, int> seen;
  for (const OpSpan& s : first_spans) {
    const int count = ++seen[std::make_tuple(s.rank, s.stream, s.op)];
    EXPECT_EQ(count, 1);
  }
  // Transfers: one per send.
  int64_t sends = 0;
  for (const auto& b : p.ranks()) {
    for (const auto& s : p.classes(b.class_id()).streams()) {
      for (const auto& op : s.ops()) sends += op.has_send();
    }
  }
  EXPECT_EQ(static_cast<int64_t>(obs.transfers.size()), sends);

  obs.spans.clear();
  const SimulationResult second = sim.run();
  EXPECT_EQ(second.end_time, first.end_time);
  EXPECT_EQ(second.events, first.events);
  ASSERT_EQ(obs.spans.size(), first_spans.size());
  for (size_t i = 0; i < first_spans.size(); ++i) {
    EXPECT_EQ(obs.spans[i].rank, first_spans[i].rank);
    EXPECT_EQ(obs.spans[i].op, first_spans[i].op);
    EXPECT_EQ(obs.spans[i].start, first_spans[i].start);
    EXPECT_EQ(obs.spans[i].end, first_spans[i].end);
  }
}

TEST(Simulator, ZeroObserversGiveTheSameResult) {
  testing::PipelineSpec spec;
  spec.seed = 5;
  const ir::Program p = make_pipeline_program(spec);
  ClosedFormCost cost;
  Simulator plain(p, cost);
  Simulator observed(p, cost);
  RecordingObserver obs;
  observed.add_observer(&obs);
  const SimulationResult a = plain.run();
  const SimulationResult b = observed.run();
  EXPECT_EQ(a.end_time, b.end_time);
  EXPECT_EQ(a.events, b.events);
  EXPECT_EQ(obs.run_end, a.end_time);
}

}  // namespace
}  // namespace lacuna::engine
