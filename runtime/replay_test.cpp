// Replay mode (runtime/replay.h): execute some ranks for real and emulate
// their communication with ranks that are not executed from a simulation's
// predicted spans. Only lower bounds that the emulation's sleeps guarantee are
// asserted, never upper bounds on elapsed time.
#include "runtime/replay.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "runtime/executor.h"
#include "sim/core/error.h"
#include "runtime/runtime_test_support.h"
#include "sim/engine/engine_test_support.h"
#include "sim/engine/simulator.h"
#include "sim/ir/digest.h"
#include "sim/report/observers/bubble_accounting.h"
#include "sim/report/analyses/rank_spec.h"
#include "sim/report/formats/span_trace.h"
#include "sim/report/analyses/summary.h"
#include "sim/report/observers/timeline.h"
#include "sim/proto/program.pb.h"

namespace lacuna::runtime {
namespace {

using ::testing::HasSubstr;
using testing::execute_error;
using testing::find_span;

using engine::testing::add_class;
using engine::testing::add_collective;
using engine::testing::add_compute;
using engine::testing::add_group;
using engine::testing::add_rank;
using engine::testing::add_recv;
using engine::testing::add_send;

// Rank 0, stream "s": 0 compute 100 µs, 1 send 256 B to rank 1, 2 all-reduce.
// Rank 1, stream "s": 0 recv 256 B from rank 0, 1 all-reduce.
// Both on the 2-rank group 0.
ir::Program two_rank_program(std::int64_t rank1_compute_ns = 0) {
  ir::Program p;
  // Slots, for the simulator's validation (the executor does not need them).
  p.add_group_slots()->set_name("world");
  p.add_peer_slots()->set_name("peer");
  ir::RankClass* a = add_class(p, "sender", 0, {"s"});
  add_compute(a->mutable_streams(0), 100'000);
  add_send(a->mutable_streams(0), 0, 256, 0, 1);
  add_collective(a->mutable_streams(0), ir::ALL_REDUCE, 0, 64);
  ir::RankClass* b = add_class(p, "receiver", 0, {"s"});
  if (rank1_compute_ns > 0) add_compute(b->mutable_streams(0), rank1_compute_ns);
  add_recv(b->mutable_streams(0), 0, 256, 0, 1);
  add_collective(b->mutable_streams(0), ir::ALL_REDUCE, 0, 64);
  const int32_t g = add_group(p, ir::WORLD, {0, 1});
  add_rank(p, 0, {g}, {1});
  add_rank(p, 1, {g}, {0});
  return p;
}

TEST(Replay, EmulatedRecvAndCollectiveTakeAtLeastTheirPredictedSpans) {
  const ir::Program p = two_rank_program();
  ReplayTimes times;
  times.set(1, 0, 0, {.start_ns = 2'000'000, .end_ns = 5'000'000});  // recv
  times.set(1, 0, 1, {.start_ns = 6'000'000, .end_ns = 7'000'000});  // all-reduce
  const ExecutionResult r = execute(p, {.timeout = std::chrono::milliseconds(5000), .ranks = {1}, .replay = &times});

  EXPECT_EQ(r.ranks, std::vector<int>{1});
  EXPECT_EQ(r.emulated_ops, 2);
  EXPECT_EQ(r.bytes_moved, 0);  // nothing moved: the peer is the prediction
  ASSERT_EQ(r.spans.size(), 2u);
  const ExecutedSpan* recv = find_span(r, 1, 0, 0);
  const ExecutedSpan* ar = find_span(r, 1, 0, 1);
  ASSERT_NE(recv, nullptr);
  ASSERT_NE(ar, nullptr);
  // The recv is reached at once but waits for the predicted arrival, then
  // takes the predicted transfer time.
  EXPECT_LE(recv->ready_ns, recv->start_ns);
  EXPECT_GE(recv->start_ns, 2'000'000);
  EXPECT_GE(recv->end_ns - recv->start_ns, 3'000'000);
  EXPECT_GE(recv->end_ns, 5'000'000);
  // The collective follows in stream order and honours its own prediction.
  EXPECT_GE(ar->ready_ns, recv->end_ns);
  EXPECT_GE(ar->start_ns, ar->ready_ns);
  EXPECT_GE(ar->start_ns, 6'000'000);
  EXPECT_GE(ar->end_ns - ar->start_ns, 1'000'000);
  EXPECT_GE(ar->end_ns, 7'000'000);
  EXPECT_GE(r.end_ns, 7'000'000);
}

TEST(Replay, EmulatedOpReachedAfterItsPredictedStartStartsWhenReached) {
  // Rank 1 computes 3 ms before its recv, whose predicted span is [1, 2] ms:
  // start = max(reached, predicted start) = reached, and it still takes the
  // predicted 1 ms.
  const ir::Program p = two_rank_program(/*rank1_compute_ns=*/3'000'000);
  ReplayTimes times;
  times.set(1, 0, 1, {.start_ns = 1'000'000, .end_ns = 2'000'000});  // recv
  times.set(1, 0, 2, {.start_ns = 2'000'000, .end_ns = 2'000'000});  // all-reduce, zero duration
  const ExecutionResult r = execute(p, {.ranks = {1}, .replay = &times});
  EXPECT_EQ(r.emulated_ops, 2);
  const ExecutedSpan* recv = find_span(r, 1, 0, 1);
  ASSERT_NE(recv, nullptr);
  EXPECT_GE(recv->ready_ns, 3'000'000);
  EXPECT_EQ(recv->start_ns, recv->ready_ns);
  EXPECT_GE(recv->end_ns - recv->start_ns, 1'000'000);
  const ExecutedSpan* ar = find_span(r, 1, 0, 2);
  ASSERT_NE(ar, nullptr);
  EXPECT_EQ(ar->start_ns, ar->ready_ns);
  EXPECT_GE(ar->end_ns, ar->start_ns);
}

TEST(Replay, ExecutingASubsetWithoutReplayNamesThePeerAndSuggestsReplay) {
  const ir::Program p = two_rank_program();
  const std::string what = execute_error(p, {.ranks = {1}});
  EXPECT_THAT(what, HasSubstr("rank 1 stream 0 (s) op 0"));
  EXPECT_THAT(what, HasSubstr("rank 0"));
  EXPECT_THAT(what, HasSubstr("not executed"));
  EXPECT_THAT(what, HasSubstr("--replay"));
}

TEST(Replay, CollectiveWithAMissingMemberWithoutReplaySuggestsReplay) {
  // Only a collective crosses the selection: the error names the group's
  // missing member.
  ir::Program p;
  ir::RankClass* c = add_class(p, "r", 0, {"dp"});
  add_collective(c->mutable_streams(0), ir::ALL_REDUCE, 0, 64);
  const int32_t g = add_group(p, ir::WORLD, {0, 1});
  add_rank(p, 0, {g});
  add_rank(p, 0, {g});
  const std::string what = execute_error(p, {.ranks = {0}});
  EXPECT_THAT(what, HasSubstr("rank 0 stream 0 (dp) op 0"));
  EXPECT_THAT(what, HasSubstr("rank 1"));
  EXPECT_THAT(what, HasSubstr("--replay"));
}

TEST(Replay, MissingPredictedSpanNamesTheOp) {
  const ir::Program p = two_rank_program();
  ReplayTimes times;
  times.set(1, 0, 0, {.start_ns = 0, .end_ns = 1000});  // the recv; the all-reduce has none
  const std::string what = execute_error(p, {.ranks = {1}, .replay = &times});
  EXPECT_THAT(what, HasSubstr("no predicted time for rank 1 stream 0 (s) op 1"));
  EXPECT_THAT(what, HasSubstr("all_reduce"));
}

TEST(Replay, PredictedSpanEndingBeforeItStartsIsRejected) {
  const ir::Program p = two_rank_program();
  ReplayTimes times;
  times.set(1, 0, 0, {.start_ns = 5000, .end_ns = 1000});
  times.set(1, 0, 1, {.start_ns = 6000, .end_ns = 7000});
  const std::string what = execute_error(p, {.ranks = {1}, .replay = &times});
  EXPECT_THAT(what, HasSubstr("rank 1 stream 0 (s) op 0"));
  EXPECT_THAT(what, HasSubstr("ends before it starts"));
}

TEST(Replay, ExecutingEveryRankEmulatesNothing) {
  // A replay with every rank executed: nothing is emulated and data moves.
  const ir::Program p = two_rank_program();
  ReplayTimes times;
  const ExecutionResult r = execute(p, {.replay = &times});
  EXPECT_EQ(r.emulated_ops, 0);
  EXPECT_EQ(r.ranks, (std::vector<int>{0, 1}));
  EXPECT_GT(r.bytes_moved, 0);
}

// ---------------------------------------------------------------- ReplayRecorder

struct Simulated {
  engine::testing::RecordingObserver all;
  ReplayTimes times;
  TimeNs end;
};

void simulate(const ir::Program& p, std::vector<int> ranks, Simulated& out) {
  engine::testing::ClosedFormCost cost;
  engine::Simulator sim(p, cost);
  ReplayRecorder recorder(out.times, std::move(ranks));
  sim.add_observer(&out.all);
  sim.add_observer(&recorder);
  out.end = sim.run().end_time;
}

bool is_comm(const engine::OpSpan& s) {
  return s.ir->has_collective() || s.ir->has_send() || s.ir->has_recv();
}

TEST(ReplayRecorder, RecordsExactlyTheCommOpsOfTheSelectedRanks) {
  const ir::Program p = two_rank_program(/*rank1_compute_ns=*/50'000);
  Simulated sim;
  simulate(p, {1}, sim);
  // Rank 1: recv (op 1) and all-reduce (op 2); its compute (op 0) is not kept.
  EXPECT_EQ(sim.times.size(), 2u);
  std::size_t expected = 0;
  for (const engine::OpSpan& s : sim.all.spans) {
    const PredictedSpan* got = sim.times.find(s.rank, s.stream, s.op);
    if (s.rank == 1 && is_comm(s)) {
      ++expected;
      ASSERT_NE(got, nullptr) << "rank " << s.rank << " op " << s.op;
      EXPECT_EQ(got->start_ns, s.start.count());
      EXPECT_EQ(got->end_ns, s.end.count());
    } else {
      EXPECT_EQ(got, nullptr) << "rank " << s.rank << " op " << s.op;
    }
  }
  EXPECT_EQ(expected, 2u);
  EXPECT_EQ(sim.times.iteration_ns, sim.end.count());
  EXPECT_GT(sim.times.iteration_ns, 0);
}

TEST(ReplayRecorder, EmptySelectionRecordsEveryRank) {
  const ir::Program p = two_rank_program();
  Simulated sim;
  simulate(p, {}, sim);
  std::size_t comm_ops = 0;
  for (const engine::OpSpan& s : sim.all.spans) comm_ops += is_comm(s) ? 1 : 0;
  EXPECT_EQ(comm_ops, 4u);  // send, all-reduce; recv, all-reduce
  EXPECT_EQ(sim.times.size(), comm_ops);
  EXPECT_NE(sim.times.find(0, 0, 1), nullptr);
  EXPECT_EQ(sim.times.find(0, 0, 0), nullptr);  // compute
  EXPECT_EQ(sim.times.iteration_ns, sim.end.count());
}

TEST(ReplayRecorder, ItsPredictionReplaysTheSelectedRank) {
  // The intended workflow: simulate, record rank 1's comm ops, execute rank 1
  // alone against them.
  const ir::Program p = two_rank_program();
  Simulated sim;
  simulate(p, {1}, sim);
  const ExecutionResult r = execute(p, {.ranks = {1}, .replay = &sim.times});
  EXPECT_EQ(r.emulated_ops, 2);
  ASSERT_EQ(r.spans.size(), 2u);
  for (const ExecutedSpan& s : r.spans) {
    const PredictedSpan* predicted = sim.times.find(s.rank, s.stream, s.op);
    ASSERT_NE(predicted, nullptr);
    EXPECT_GE(s.start_ns, predicted->start_ns);
    EXPECT_GE(s.end_ns - s.start_ns, predicted->end_ns - predicted->start_ns);
    EXPECT_GE(s.end_ns, predicted->end_ns);
  }
}

TEST(ReplayRecorder, APredictionWithHostCostsReplaysToo) {
  // The sender's host issues its send 30 µs late and after synchronising:
  // the predicted recv of rank 1 starts no earlier than 100 + 30 µs, and
  // rank 1 replayed alone against that prediction waits for it.
  ir::Program p = two_rank_program();
  ir::Op* send = p.mutable_classes(0)->mutable_streams(0)->mutable_ops(1);
  send->set_host_ns(30'000);
  send->set_host_sync(true);
  Simulated sim;
  simulate(p, {1}, sim);
  const PredictedSpan* recv = sim.times.find(1, 0, 0);
  ASSERT_NE(recv, nullptr);
  EXPECT_EQ(recv->start_ns, 130'000);
  const ExecutionResult r = execute(p, {.ranks = {1}, .replay = &sim.times});
  EXPECT_EQ(r.emulated_ops, 2);
  const ExecutedSpan* got = find_span(r, 1, 0, 0);
  ASSERT_NE(got, nullptr);
  EXPECT_GE(got->end_ns, recv->end_ns);
}


// ---------------------------------------------------------------- a saved prediction

// `simulate --spans` of the program, with the ranks `trace_ranks` traced.
trace::Trace saved_prediction(const ir::Program& p, const std::string& trace_ranks, ReplayTimes* recorded = nullptr) {
  engine::testing::ClosedFormCost cost;
  engine::Simulator sim(p, cost);
  report::BubbleAccounting accounting;
  report::TimelineRecorder timeline(p, report::parse_rank_spec(trace_ranks));
  ReplayTimes times;
  ReplayRecorder recorder(times, {});
  sim.add_observer(&accounting);
  sim.add_observer(&timeline);
  sim.add_observer(&recorder);
  sim.run();
  if (recorded != nullptr) *recorded = times;
  report::Summary summary = report::summarize(p, accounting, "closed form", false);
  return report::make_span_trace(summary, timeline.timeline(), trace::PREDICTION, ir::content_digest(p));
}

TEST(ReplayFromTrace, GivesWhatASimulationRecords) {
  const ir::Program p = two_rank_program(/*rank1_compute_ns=*/50'000);
  ReplayTimes recorded;
  const trace::Trace t = saved_prediction(p, "all", &recorded);
  for (const std::vector<int>& ranks : {std::vector<int>{1}, std::vector<int>{}}) {
    const ReplayTimes loaded = replay_times_from_trace(p, t, ranks, "pred.spans");
    EXPECT_EQ(loaded.iteration_ns, recorded.iteration_ns);
    std::size_t n = 0;
    for (int r = 0; r < 2; ++r) {
      const bool wanted = ranks.empty() || r == 1;
      for (int s = 0; s < 4; ++s) {
        for (int op = 0; op < 4; ++op) {
          const PredictedSpan* want = recorded.find(r, s, op);
          const PredictedSpan* got = loaded.find(r, s, op);
          if (want == nullptr || !wanted) {
            EXPECT_EQ(got, nullptr) << r << " " << s << " " << op;
            continue;
          }
          ASSERT_NE(got, nullptr) << r << " " << s << " " << op;
          EXPECT_EQ(got->start_ns, want->start_ns);
          EXPECT_EQ(got->end_ns, want->end_ns);
          ++n;
        }
      }
    }
    EXPECT_EQ(loaded.size(), n);
    EXPECT_GT(n, 0u);
  }
  // And it replays rank 1 as the fresh prediction does.
  const ReplayTimes loaded = replay_times_from_trace(p, t, {1}, "pred.spans");
  EXPECT_EQ(execute(p, {.ranks = {1}, .replay = &loaded}).emulated_ops, 2);
}

TEST(ReplayFromTrace, RefusesAnotherProgramAMeasurementAndMissingRanks) {
  const ir::Program p = two_rank_program();
  const trace::Trace t = saved_prediction(p, "all");
  const auto error = [&](const trace::Trace& bad, std::vector<int> ranks = {1}) {
    try {
      (void)replay_times_from_trace(p, bad, ranks, "pred.spans");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error(t), "");
  {
    const ir::Program other = two_rank_program(/*rank1_compute_ns=*/7);
    EXPECT_THAT(error(saved_prediction(other, "all")), HasSubstr("pred.spans: program_digest: a prediction of program"));
  }
  {
    trace::Trace bad = t;
    bad.set_origin(trace::MEASUREMENT);
    EXPECT_THAT(error(bad), HasSubstr("origin: a measurement, not a prediction"));
  }
  {
    trace::Trace bad = t;
    bad.set_iterations(2);
    EXPECT_THAT(error(bad), HasSubstr("iterations"));
  }
  EXPECT_THAT(error(saved_prediction(p, "0")), HasSubstr("no spans of rank 1, which this execute runs"));
  {
    trace::Trace bad = t;
    bad.mutable_ranks(1)->mutable_streams(0)->mutable_spans(0)->set_op(99);
    EXPECT_THAT(error(bad), HasSubstr("ranks[1].streams[0]: names an op the stream does not have"));
  }
}

}  // namespace
}  // namespace lacuna::runtime
