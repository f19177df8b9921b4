// runtime::feed_observers: a measured iteration is told to the engine's
// observers as the simulator tells a simulated one. A hand-built
// ExecutionResult pins every reconstructed callback exactly; a real CPU run
// fed into the bubble accounting checks its exact invariant.
#include "runtime/observe.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/executor.h"
#include "sim/core/error.h"
#include "sim/engine/engine_test_support.h"
#include "sim/proto/program.pb.h"
#include "sim/report/observers/bubble_accounting.h"
#include "sim/report/analyses/rank_spec.h"
#include "sim/report/observers/timeline.h"

namespace lacuna::runtime {
namespace {

using ::testing::HasSubstr;

using engine::testing::add_class;
using engine::testing::add_collective;
using engine::testing::add_compute;
using engine::testing::add_group;
using engine::testing::add_rank;
using engine::testing::add_record;
using engine::testing::add_recv;
using engine::testing::add_send;
using engine::testing::add_wait;
using engine::testing::RecordingObserver;

// Rank 0 (class "a", 1 event):
//   s0 compute: 0 compute  1 record e0  2 compute  3 record e0
//   s1 send:    0 wait e0>=1  1 send ch0  2 wait e0>=2  3 send ch0  4 send ch1
// Rank 1 (class "b", 2 events):
//   s0 recv_a:  0 recv ch0
//   s1 recv_b:  0 recv ch0  1 record e0  2 recv ch1
//   s2 compute: 0 wait e1>=1  1 wait e0>=1  2 compute
//   s3 marker:  0 record e1
ir::Program hand_program() {
  ir::Program p;
  ir::RankClass* a = add_class(p, "a", 1, {"compute", "send"});
  add_compute(a->mutable_streams(0), 100);
  add_record(a->mutable_streams(0), 0);
  add_compute(a->mutable_streams(0), 100);
  add_record(a->mutable_streams(0), 0);
  add_wait(a->mutable_streams(1), 0, 1);
  add_send(a->mutable_streams(1), 0, 64, 0, 1);
  add_wait(a->mutable_streams(1), 0, 2);
  add_send(a->mutable_streams(1), 0, 64, 0, 2);
  add_send(a->mutable_streams(1), 0, 64, 1, 3);
  ir::RankClass* b = add_class(p, "b", 2, {"recv_a", "recv_b", "compute", "marker"});
  add_recv(b->mutable_streams(0), 0, 64, 0, 2);
  add_recv(b->mutable_streams(1), 0, 64, 0, 1);
  add_record(b->mutable_streams(1), 0);
  add_recv(b->mutable_streams(1), 0, 64, 1, 3);
  add_wait(b->mutable_streams(2), 1, 1);
  add_wait(b->mutable_streams(2), 0, 1);
  add_compute(b->mutable_streams(2), 100);
  add_record(b->mutable_streams(3), 1);
  add_rank(p, 0, {}, {1});
  add_rank(p, 1, {}, {0});
  return p;
}

// Measured times (ns), chosen so that ties in end time, a valid and an invalid
// wait cause, a record first on its stream and recvs reached out of stream
// order all occur.
std::vector<ExecutedSpan> hand_spans(int iteration) {
  const int it = iteration;
  return {
      {it, 0, 0, 0, 0, 0, 100},      // compute
      {it, 0, 0, 1, 100, 100, 105},  // record e0 (#1)
      {it, 0, 0, 2, 105, 105, 200},  // compute
      {it, 0, 0, 3, 200, 200, 250},  // record e0 (#2)
      {it, 0, 1, 0, 0, 0, 106},      // wait e0>=1: released by #1, reached before it → cause s0 op 0
      {it, 0, 1, 1, 106, 150, 300},  // send ch0, reached 106
      {it, 0, 1, 2, 300, 300, 300},  // wait e0>=2: #2 ended at 250 < 300 → no cause
      {it, 0, 1, 3, 400, 500, 600},  // send ch0, reached 400
      {it, 0, 1, 4, 600, 600, 700},  // send ch1
      {it, 1, 0, 0, 500, 500, 600},  // recv ch0, reached 500 → pairs with the second send
      {it, 1, 1, 0, 100, 150, 300},  // recv ch0, reached 100 → pairs with the first send
      {it, 1, 1, 1, 300, 300, 301},  // record e0
      {it, 1, 1, 2, 301, 600, 700},  // recv ch1
      {it, 1, 2, 0, 0, 0, 61},       // wait e1>=1: released by the marker's record (first on its stream)
      {it, 1, 2, 1, 61, 61, 302},    // wait e0>=1: released by recv_b's record → cause s1 op 0
      {it, 1, 2, 2, 302, 302, 400},  // compute
      {it, 1, 3, 0, 50, 50, 60},     // record e1
  };
}

ExecutionResult hand_result() {
  ExecutionResult r;
  // Iteration 0 has other times: feeding iteration 1 must not see them.
  for (ExecutedSpan s : hand_spans(0)) {
    s.ready_ns += 7;
    s.start_ns += 7;
    s.end_ns += 10'000;
    r.spans.push_back(s);
  }
  for (const ExecutedSpan& s : hand_spans(1)) r.spans.push_back(s);
  r.iteration_ns = {10'700, 700};
  r.end_ns = 700;
  r.ranks = {0, 1};
  return r;
}

using Id = std::tuple<int, int, int>;
Id id(const engine::OpSpan& s) { return {s.rank, s.stream, s.op}; }

TEST(FeedObservers, RunInfoListsTheExecutedRanksEachStandingForItself) {
  const ir::Program p = hand_program();
  RecordingObserver obs;
  feed_observers(p, hand_result(), 1, {&obs});
  EXPECT_EQ(obs.runs, 1);
  EXPECT_EQ(obs.simulated, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(obs.represents, (std::vector<std::vector<int32_t>>{{0}, {1}}));
}

TEST(FeedObservers, EveryOpEndsOnceInEndRankStreamOpOrder) {
  const ir::Program p = hand_program();
  RecordingObserver obs;
  feed_observers(p, hand_result(), 1, {&obs});
  const std::vector<ExecutedSpan> expected = hand_spans(1);
  ASSERT_EQ(obs.spans.size(), expected.size());
  for (std::size_t i = 1; i < obs.spans.size(); ++i) {
    const engine::OpSpan& a = obs.spans[i - 1];
    const engine::OpSpan& b = obs.spans[i];
    EXPECT_LT(std::tie(a.end, a.rank, a.stream, a.op), std::tie(b.end, b.rank, b.stream, b.op)) << i;
  }
  for (const ExecutedSpan& e : expected) {
    int seen = 0;
    for (const engine::OpSpan& s : obs.spans) {
      if (id(s) != Id{e.rank, e.stream, e.op}) continue;
      ++seen;
      EXPECT_EQ(s.ready.count(), e.ready_ns);
      EXPECT_EQ(s.start.count(), e.start_ns);
      EXPECT_EQ(s.end.count(), e.end_ns);
      EXPECT_EQ(s.ir, &p.classes(e.rank).streams(e.stream).ops(e.op));  // rank r has class r here
    }
    EXPECT_EQ(seen, 1) << "rank " << e.rank << " stream " << e.stream << " op " << e.op;
  }
  ASSERT_TRUE(obs.run_end.has_value());
  EXPECT_EQ(*obs.run_end, TimeNs(700));
}

TEST(FeedObservers, WaitCausesAreTheOpsBeforeTheSatisfyingRecords) {
  const ir::Program p = hand_program();
  RecordingObserver obs;
  feed_observers(p, hand_result(), 1, {&obs});
  ASSERT_EQ(obs.waits.size(), 4u);  // every wait, once
  auto wait = [&](int rank, int stream, int op) -> const engine::testing::RecordedWait* {
    for (const engine::testing::RecordedWait& w : obs.waits) {
      if (id(w.span) == Id{rank, stream, op}) return &w;
    }
    ADD_FAILURE() << "no on_wait_end for rank " << rank << " stream " << stream << " op " << op;
    return nullptr;
  };
  // Released by the first record of e0 on rank 0: the op before it is the compute.
  const engine::testing::RecordedWait* w = wait(0, 1, 0);
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(w->cause.valid);
  EXPECT_EQ(w->cause.stream, 0);
  EXPECT_EQ(w->cause.op, 0);
  EXPECT_EQ(w->cause.ready, TimeNs(0));
  EXPECT_EQ(w->cause.start, TimeNs(0));
  EXPECT_EQ(w->cause.end, TimeNs(100));
  // The second record had ended before the wait was reached: no cause.
  w = wait(0, 1, 2);
  ASSERT_NE(w, nullptr);
  EXPECT_FALSE(w->cause.valid);
  // Released by rank 1's record after the recv, whose start is later than its ready.
  w = wait(1, 2, 1);
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(w->cause.valid);
  EXPECT_EQ(w->cause.stream, 1);
  EXPECT_EQ(w->cause.op, 0);
  EXPECT_EQ(w->cause.ready, TimeNs(100));
  EXPECT_EQ(w->cause.start, TimeNs(150));
  EXPECT_EQ(w->cause.end, TimeNs(300));
  // The record is first on its stream: op -1, all times at the record's end.
  w = wait(1, 2, 0);
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(w->cause.valid);
  EXPECT_EQ(w->cause.stream, 3);
  EXPECT_EQ(w->cause.op, -1);
  EXPECT_EQ(w->cause.ready, TimeNs(60));
  EXPECT_EQ(w->cause.start, TimeNs(60));
  EXPECT_EQ(w->cause.end, TimeNs(60));
  // Each on_wait_end follows its own on_op_end: the waits come in end order too.
  for (std::size_t i = 1; i < obs.waits.size(); ++i) EXPECT_LE(obs.waits[i - 1].span.end, obs.waits[i].span.end);
}

TEST(FeedObservers, TransfersPairTheKthSendWithTheKthRecvPerChannelInReadyOrder) {
  const ir::Program p = hand_program();
  RecordingObserver obs;
  feed_observers(p, hand_result(), 1, {&obs});
  ASSERT_EQ(obs.transfers.size(), 3u);
  // In order of the pair's end: 300, 600, 700.
  EXPECT_EQ(id(obs.transfers[0].first), (Id{0, 1, 1}));
  EXPECT_EQ(id(obs.transfers[0].second), (Id{1, 1, 0}));  // recv reached at 100, stream 1
  EXPECT_EQ(id(obs.transfers[1].first), (Id{0, 1, 3}));
  EXPECT_EQ(id(obs.transfers[1].second), (Id{1, 0, 0}));  // recv reached at 500, stream 0
  EXPECT_EQ(id(obs.transfers[2].first), (Id{0, 1, 4}));   // channel 1
  EXPECT_EQ(id(obs.transfers[2].second), (Id{1, 1, 2}));
}

TEST(FeedObservers, SendsWithoutAnExecutedPartnerGetNoTransfer) {
  // As after a replay of rank 0 alone: its sends' partners were emulated.
  const ir::Program p = hand_program();
  ExecutionResult r;
  for (const ExecutedSpan& s : hand_spans(0)) {
    if (s.rank == 0) r.spans.push_back(s);
  }
  r.ranks = {0};
  RecordingObserver obs;
  feed_observers(p, r, 0, {&obs});
  EXPECT_EQ(obs.simulated, std::vector<int32_t>{0});
  EXPECT_EQ(obs.represents, (std::vector<std::vector<int32_t>>{{0}}));
  EXPECT_EQ(obs.spans.size(), 9u);
  EXPECT_TRUE(obs.transfers.empty());
  ASSERT_TRUE(obs.run_end.has_value());
  EXPECT_EQ(*obs.run_end, TimeNs(700));
}

TEST(FeedObservers, EveryObserverGetsEveryCallback) {
  const ir::Program p = hand_program();
  RecordingObserver first, second;
  feed_observers(p, hand_result(), 1, {&first, &second});
  EXPECT_EQ(first.spans.size(), second.spans.size());
  EXPECT_EQ(first.waits.size(), second.waits.size());
  EXPECT_EQ(first.transfers.size(), second.transfers.size());
  EXPECT_EQ(first.run_end, second.run_end);
}

TEST(FeedObservers, AnIterationWithoutSpansIsAnError) {
  const ir::Program p = hand_program();
  RecordingObserver obs;
  try {
    feed_observers(p, hand_result(), 2, {&obs});
    ADD_FAILURE() << "feed_observers did not throw";
  } catch (const lacuna::Error& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("iteration 2"));
  }
  EXPECT_EQ(obs.runs, 0);  // nothing was told
}

// ---------------------------------------------------------------- end to end

// Two pipeline-like ranks with a COMPUTE main stream each: rank 0 computes,
// then sends; rank 1 waits for the receive, computes forward and backward,
// and both all-reduce on a TP stream that rank 1's compute waits for.
ir::Program pipeline_program() {
  ir::Program p;
  ir::Slot* tp = p.add_group_slots();
  tp->set_name("tp");
  tp->set_kind(ir::TP);
  p.add_peer_slots()->set_name("pp");

  ir::RankClass* a = add_class(p, "first", 1, {"compute", "pp_send", "tp"});
  a->mutable_streams(0)->set_kind(ir::COMPUTE);
  a->mutable_streams(1)->set_kind(ir::PP_SEND);
  a->mutable_streams(2)->set_kind(ir::TP_COMM);
  add_compute(a->mutable_streams(0), 300'000).set_phase(ir::FORWARD);
  add_record(a->mutable_streams(0), 0);
  add_compute(a->mutable_streams(0), 100'000).set_phase(ir::BACKWARD_INPUT);
  add_wait(a->mutable_streams(1), 0, 1);
  add_send(a->mutable_streams(1), 0, 4096, 0, 1);
  add_collective(a->mutable_streams(2), ir::ALL_REDUCE, 0, 4096);

  ir::RankClass* b = add_class(p, "second", 2, {"compute", "pp_recv", "tp"});
  b->mutable_streams(0)->set_kind(ir::COMPUTE);
  b->mutable_streams(1)->set_kind(ir::PP_RECV);
  b->mutable_streams(2)->set_kind(ir::TP_COMM);
  add_wait(b->mutable_streams(0), 0, 1);
  add_compute(b->mutable_streams(0), 200'000).set_phase(ir::FORWARD);
  add_wait(b->mutable_streams(0), 1, 1);
  add_compute(b->mutable_streams(0), 200'000).set_phase(ir::BACKWARD_INPUT);
  add_recv(b->mutable_streams(1), 0, 4096, 0, 1);
  add_record(b->mutable_streams(1), 0);
  add_collective(b->mutable_streams(2), ir::ALL_REDUCE, 0, 4096);
  add_record(b->mutable_streams(2), 1);

  const int32_t g = add_group(p, ir::TP, {0, 1});
  add_rank(p, 0, {g}, {1});
  add_rank(p, 1, {g}, {0});
  return p;
}

TEST(FeedObserversEndToEnd, MeasuredRunKeepsTheBubbleAccountingInvariant) {
  const ir::Program p = pipeline_program();
  const ExecutionResult r = execute(p, {.iterations = 2, .keep_all_iterations = true});
  for (int it = 0; it < 2; ++it) {
    SCOPED_TRACE("iteration " + std::to_string(it));
    report::BubbleAccounting acc;
    RecordingObserver obs;
    feed_observers(p, r, it, {&acc, &obs});
    ASSERT_TRUE(obs.run_end.has_value());
    EXPECT_EQ(acc.iteration_time(), *obs.run_end);
    std::int64_t last_end = 0;
    for (const ExecutedSpan& s : r.spans) {
      if (s.iteration == it) last_end = std::max(last_end, s.end_ns);
    }
    EXPECT_EQ(acc.iteration_time(), TimeNs(last_end));
    ASSERT_EQ(acc.ranks().size(), 2u);
    for (const report::RankAccount& ra : acc.ranks()) {
      SCOPED_TRACE("rank " + std::to_string(ra.rank));
      // The accounting's invariant: every ns of the iteration is busy or idle.
      EXPECT_EQ(ra.busy + ra.idle(), acc.iteration_time());
      // Lower bounds from the fixed-duration sleeps.
      EXPECT_GE(ra.busy, TimeNs(400'000));
    }
    // Rank 1 cannot start before rank 0's 300 µs forward has been sent: idle.
    EXPECT_GE(acc.ranks()[1].idle(), TimeNs(300'000));
    EXPECT_EQ(obs.transfers.size(), 1u);
    EXPECT_EQ(obs.waits.size(), 3u);
  }
}

TEST(FeedObserversEndToEnd, TheExecutorIgnoresHostCostsAndReportsNoHostOverhead) {
  // Host costs are the simulator's model of a host (docs/engine.md#host); the
  // real one has its own. 10 s per op would make the iteration last a minute
  // if they were honoured: the bound leaves four orders of magnitude.
  ir::Program p = pipeline_program();
  for (ir::RankClass& c : *p.mutable_classes()) {
    for (ir::Stream& s : *c.mutable_streams()) {
      for (ir::Op& op : *s.mutable_ops()) {
        op.set_host_ns(10'000'000'000);
        op.set_host_sync(true);
      }
    }
  }
  const ExecutionResult r = execute(p, {});
  EXPECT_LT(r.end_ns, 10'000'000'000);
  report::BubbleAccounting acc;
  RecordingObserver obs;
  feed_observers(p, r, 0, {&acc, &obs});
  for (const engine::OpSpan& s : obs.spans) EXPECT_EQ(s.issued, s.ready) << s.rank << " " << s.stream << " " << s.op;
  for (const report::RankAccount& ra : acc.ranks()) {
    EXPECT_EQ(ra.bubble(report::Bubble::kHostOverhead), TimeNs(0));
    EXPECT_EQ(ra.busy + ra.idle(), acc.iteration_time());
  }
}

TEST(FeedObserversEndToEnd, TimelineOfAMeasuredRunHasEveryOpInOrder) {
  const ir::Program p = pipeline_program();
  const ExecutionResult r = execute(p, {});
  report::TimelineRecorder timeline(p, report::parse_rank_spec("all"));
  feed_observers(p, r, 0, {&timeline});
  const report::Timeline& t = timeline.timeline();
  ASSERT_EQ(t.ranks.size(), 2u);
  for (const report::TimelineRank& tr : t.ranks) {
    const ir::RankClass& cls = p.classes(p.ranks(tr.rank).class_id());
    ASSERT_EQ(tr.streams.size(), static_cast<std::size_t>(cls.streams_size()));
    for (const report::TimelineStream& ts : tr.streams) {
      std::vector<int32_t> expected;
      for (int i = 0; i < cls.streams(ts.stream).ops_size(); ++i) {
        const ir::Op& op = cls.streams(ts.stream).ops(i);
        if (!op.has_record() && !op.has_wait()) expected.push_back(i);
      }
      std::vector<int32_t> got;
      for (const report::TimelineOp& o : ts.ops) got.push_back(o.op);
      EXPECT_EQ(got, expected) << "rank " << tr.rank << " stream " << ts.stream;
    }
  }
}

}  // namespace
}  // namespace lacuna::runtime
