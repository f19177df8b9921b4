// The CPU executor on small hand-built programs: stream and event semantics,
// collectives and transfers across ranks, deadlock reports, CPU kernels.
// No timing thresholds: only orderings that the semantics guarantee.
#include "runtime/executor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <initializer_list>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "runtime/runtime_test_support.h"
#include "sim/engine/engine_test_support.h"
#include "sim/proto/program.pb.h"

namespace lacuna::runtime {
namespace {

using ::testing::HasSubstr;
using testing::add_gemm;
using testing::execute_error;

// ---- program builders: the engine tests' (sim/engine/engine_test_support.h), plus a real GEMM

using engine::testing::add_class;
using engine::testing::add_collective;
using engine::testing::add_compute;
using engine::testing::add_group;
using engine::testing::add_rank;
using engine::testing::add_record;
using engine::testing::add_recv;
using engine::testing::add_send;
using engine::testing::add_wait;

const ExecutedSpan& span(const ExecutionResult& r, int rank, int stream, int op, int iteration = -1) {
  if (const ExecutedSpan* s = testing::find_span(r, rank, stream, op, iteration)) return *s;
  ADD_FAILURE() << "no span for rank " << rank << " stream " << stream << " op " << op;
  static const ExecutedSpan none;
  return none;
}

void expect_well_formed(const ExecutionResult& r) {
  for (const ExecutedSpan& s : r.spans) {
    EXPECT_LE(0, s.ready_ns);
    EXPECT_LE(s.ready_ns, s.start_ns);
    EXPECT_LE(s.start_ns, s.end_ns);
  }
  // In order per stream: op i+1 is reached only after op i ended.
  for (std::size_t i = 1; i < r.spans.size(); ++i) {
    const ExecutedSpan& a = r.spans[i - 1];
    const ExecutedSpan& b = r.spans[i];
    if (a.iteration == b.iteration && a.rank == b.rank && a.stream == b.stream) {
      EXPECT_EQ(a.op + 1, b.op);
      EXPECT_LE(a.end_ns, b.ready_ns) << "rank " << a.rank << " stream " << a.stream << " op " << b.op;
    }
  }
}

// ---------------------------------------------------------------- streams and events

TEST(ExecutorEvents, WaitNeverStartsWorkBeforeTheRecordedOpsEnded) {
  ir::Program p;
  ir::RankClass* c = add_class(p, "r", 2, {"compute", "comm"});
  ir::Stream* s0 = c->mutable_streams(0);
  add_compute(s0, 2'000'000);  // op 0
  add_record(s0, 0);           // op 1
  add_compute(s0, 1'000'000);  // op 2
  add_record(s0, 0);           // op 3
  add_record(s0, 1);           // op 4
  ir::Stream* s1 = c->mutable_streams(1);
  add_wait(s1, 0, 1);          // op 0
  add_compute(s1, 500'000);    // op 1
  add_wait(s1, 0, 2);          // op 2
  add_compute(s1, 500'000);    // op 3
  add_record(s1, 1);           // op 4: event 1 is recorded by both streams
  add_wait(s1, 1, 2);          // op 5
  add_rank(p, 0);

  const ExecutionResult r = execute(p, {.iterations = 2, .keep_all_iterations = true});
  expect_well_formed(r);
  ASSERT_EQ(r.spans.size(), 2u * 11u);
  ASSERT_EQ(r.iteration_ns.size(), 2u);
  for (int it = 0; it < 2; ++it) {
    EXPECT_GE(span(r, 0, 1, 0, it).end_ns, span(r, 0, 0, 0, it).end_ns);  // wait >= 1 after compute 0
    EXPECT_GE(span(r, 0, 1, 1, it).start_ns, span(r, 0, 0, 1, it).end_ns);
    EXPECT_GE(span(r, 0, 1, 2, it).end_ns, span(r, 0, 0, 2, it).end_ns);  // wait >= 2 after compute 2
    EXPECT_GE(span(r, 0, 1, 3, it).start_ns, span(r, 0, 0, 3, it).end_ns);
    EXPECT_GE(span(r, 0, 1, 5, it).end_ns, span(r, 0, 0, 4, it).end_ns);
    EXPECT_GE(span(r, 0, 1, 5, it).end_ns, span(r, 0, 1, 4, it).end_ns);
    // Counters restart at 0: the second iteration's first wait still waits for its record.
    EXPECT_GE(span(r, 0, 1, 0, it).end_ns, 2'000'000);
  }
  EXPECT_GE(r.end_ns, 3'000'000);
  EXPECT_GE(r.iteration_ns.back(), r.end_ns);
}

TEST(ExecutorEvents, KeepsOnlyTheLastIterationByDefault) {
  ir::Program p;
  ir::RankClass* c = add_class(p, "r", 0, {"s"});
  add_compute(c->mutable_streams(0), 100'000);
  add_compute(c->mutable_streams(0), 100'000);
  add_rank(p, 0);
  const ExecutionResult r = execute(p, {.iterations = 3});
  ASSERT_EQ(r.spans.size(), 2u);
  EXPECT_EQ(r.spans[0].iteration, 2);
  EXPECT_EQ(r.iteration_ns.size(), 3u);
  EXPECT_GE(r.spans[1].end_ns, 200'000);
  EXPECT_EQ(r.ranks, std::vector<int>{0});
}

// ---------------------------------------------------------------- collectives and transfers

class ExecutorCollectives : public ::testing::TestWithParam<int> {};

TEST_P(ExecutorCollectives, EveryKindCompletesForEveryMember) {
  const int n = GetParam();
  ir::Program p;
  ir::RankClass* c = add_class(p, "r", 0, {"s"});
  ir::Stream* s = c->mutable_streams(0);
  add_compute(s, 0)  // replaced per rank below through compute_time_scale: use fixed time instead
      .mutable_compute()
      ->set_fixed_duration_ns(300'000);
  const std::vector<ir::CollectiveKind> kinds = {ir::ALL_REDUCE, ir::ALL_GATHER, ir::REDUCE_SCATTER,
                                                 ir::ALL_TO_ALL, ir::BROADCAST,  ir::REDUCE};
  for (ir::CollectiveKind k : kinds) add_collective(s, k, 0, 4 * 1000 + 12);
  add_collective(s, ir::ALL_REDUCE, 0, 4096, /*fixed_ns=*/200'000);
  std::vector<int32_t> all;
  for (int r = 0; r < n; ++r) all.push_back(r);
  const int32_t g = add_group(p, ir::WORLD, all);
  for (int r = 0; r < n; ++r) {
    // Different compute speeds so that members reach the collectives at different times.
    add_rank(p, 0, {g})->set_compute_time_scale(1.0 + r);
  }
  const ExecutionResult r = execute(p, {});
  expect_well_formed(r);
  ASSERT_EQ(r.spans.size(), static_cast<std::size_t>(n) * (kinds.size() + 2));
  for (int op = 1; op <= static_cast<int>(kinds.size()) + 1; ++op) {
    std::int64_t last_ready = 0;
    for (int m = 0; m < n; ++m) last_ready = std::max(last_ready, span(r, m, 0, op).ready_ns);
    for (int m = 0; m < n; ++m) {
      EXPECT_GE(span(r, m, 0, op).end_ns, last_ready) << "op " << op << " rank " << m;
    }
  }
  // compute_time_scale stretches the fixed compute op.
  EXPECT_GE(span(r, n - 1, 0, 0).end_ns, 300'000 * n);
  // The fixed-duration all-reduce takes at least its time after the sync.
  const int fixed_op = static_cast<int>(kinds.size()) + 1;
  for (int m = 0; m < n; ++m) {
    EXPECT_GE(span(r, m, 0, fixed_op).end_ns - span(r, m, 0, fixed_op).start_ns, 200'000);
    EXPECT_GE(span(r, m, 0, fixed_op).start_ns, span(r, n - 1, 0, fixed_op).ready_ns);
  }
  EXPECT_GT(r.bytes_moved, 0);
}

INSTANTIATE_TEST_SUITE_P(Executor, ExecutorCollectives, ::testing::Values(2, 3, 4));

TEST(ExecutorP2P, SendRecvPairsRendezvous) {
  ir::Program p;
  ir::RankClass* sender = add_class(p, "sender", 0, {"send"});
  add_send(sender->mutable_streams(0), 0, 4096, 0, 7);
  add_send(sender->mutable_streams(0), 0, 64, 1, 8, /*fixed_ns=*/300'000);
  ir::RankClass* receiver = add_class(p, "receiver", 0, {"recv"});
  add_compute(receiver->mutable_streams(0), 1'000'000);
  add_recv(receiver->mutable_streams(0), 0, 4096, 0, 7);
  add_recv(receiver->mutable_streams(0), 0, 64, 1, 8);
  add_rank(p, 0, {}, {1});
  add_rank(p, 1, {}, {0});

  const ExecutionResult r = execute(p, {});
  expect_well_formed(r);
  const ExecutedSpan& send = span(r, 0, 0, 0);
  const ExecutedSpan& recv = span(r, 1, 0, 1);
  EXPECT_GE(send.end_ns, recv.ready_ns);  // the send waited for its receiver
  EXPECT_GE(recv.end_ns, send.ready_ns);
  EXPECT_GE(send.end_ns, 1'000'000);
  // The fixed-duration transfer: the sender decides, both sides take it.
  EXPECT_GE(span(r, 0, 0, 1).end_ns - span(r, 0, 0, 1).start_ns, 300'000);
  EXPECT_GE(span(r, 1, 0, 2).end_ns - span(r, 1, 0, 2).start_ns, 300'000);
  EXPECT_GE(r.bytes_moved, 4096);
}

TEST(ExecutorP2P, TwoStreamsOfARankSendAndReceiveConcurrently) {
  // Each rank sends on one stream and receives on the other: a ring exchange
  // that deadlocks if streams were serialised.
  ir::Program p;
  ir::RankClass* c = add_class(p, "r", 0, {"send", "recv"});
  add_send(c->mutable_streams(0), 0, 1024, 0, 1);
  add_recv(c->mutable_streams(1), 1, 1024, 0, 1);
  add_rank(p, 0, {}, {1, 1});
  add_rank(p, 0, {}, {0, 0});
  const ExecutionResult r = execute(p, {.timeout = std::chrono::milliseconds(2000)});
  expect_well_formed(r);
  EXPECT_EQ(r.spans.size(), 4u);
}

// ---------------------------------------------------------------- failures

TEST(ExecutorDeadlock, RecvWithoutSendNamesRankAndOp) {
  ir::Program p;
  ir::RankClass* idle = add_class(p, "idle", 0, {"s"});
  add_compute(idle->mutable_streams(0), 1000);
  ir::RankClass* receiver = add_class(p, "receiver", 0, {"pp_recv"});
  add_recv(receiver->mutable_streams(0), 0, 256, 0, 3);
  add_rank(p, 0, {}, {1});
  add_rank(p, 1, {}, {0});
  const auto t0 = std::chrono::steady_clock::now();
  const std::string what = execute_error(p, {.timeout = std::chrono::milliseconds(300)});
  EXPECT_THAT(what, HasSubstr("rank 1 stream 0 (pp_recv) op 0"));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));  // no hang
}

TEST(ExecutorDeadlock, EventWaitNeverSatisfiedNamesRankStreamAndEvent) {
  ir::Program p;
  ir::RankClass* c = add_class(p, "r", 2, {"compute", "tp_comm"});
  add_record(c->mutable_streams(0), 0);
  add_compute(c->mutable_streams(1), 1000);
  add_wait(c->mutable_streams(1), 1, 1);  // event 1 is never recorded
  add_rank(p, 0);
  const std::string what = execute_error(p, {.timeout = std::chrono::milliseconds(300)});
  EXPECT_THAT(what, HasSubstr("rank 0 stream 1 (tp_comm) op 1"));
  EXPECT_THAT(what, HasSubstr("event 1 >= 1"));
  EXPECT_THAT(what, HasSubstr("counter at 0"));
}

TEST(ExecutorDeadlock, FailureOnOneRankStopsCollectivesOnOthers) {
  // Rank 1 waits for an event that never comes; rank 0 waits in an all-reduce
  // for rank 1. Both unwind; the report names the event wait.
  ir::Program p;
  ir::RankClass* c0 = add_class(p, "a", 0, {"s"});
  add_collective(c0->mutable_streams(0), ir::ALL_REDUCE, 0, 64);
  ir::RankClass* c1 = add_class(p, "b", 1, {"s"});
  add_wait(c1->mutable_streams(0), 0, 1);
  add_collective(c1->mutable_streams(0), ir::ALL_REDUCE, 0, 64);
  const int32_t g = add_group(p, ir::WORLD, {0, 1});
  add_rank(p, 0, {g});
  add_rank(p, 1, {g});
  const std::string what = execute_error(p, {.timeout = std::chrono::milliseconds(300)});
  EXPECT_THAT(what, HasSubstr("rank 1"));
  EXPECT_THAT(what, HasSubstr("what every stream was doing"));
}

TEST(ExecutorDeadlock, CollectiveSizeMismatchIsAnError) {
  ir::Program p;
  ir::RankClass* c0 = add_class(p, "a", 0, {"s"});
  add_collective(c0->mutable_streams(0), ir::ALL_REDUCE, 0, 64);
  ir::RankClass* c1 = add_class(p, "b", 0, {"s"});
  add_collective(c1->mutable_streams(0), ir::ALL_REDUCE, 0, 128);
  const int32_t g = add_group(p, ir::WORLD, {0, 1});
  add_rank(p, 0, {g});
  add_rank(p, 1, {g});
  const std::string what = execute_error(p, {.timeout = std::chrono::milliseconds(2000)});
  EXPECT_THAT(what, HasSubstr("execute failed"));
}

TEST(ExecutorValidation, RejectsBadProgramsBeforeRunning) {
  ir::Program p;
  ir::RankClass* c = add_class(p, "r", 1, {"s"});
  add_wait(c->mutable_streams(0), 3, 1);
  add_rank(p, 0);
  EXPECT_THAT(execute_error(p, {}), HasSubstr("event 3"));

  ir::Program q;
  ir::RankClass* d = add_class(q, "r", 0, {"s"});
  add_collective(d->mutable_streams(0), ir::ALL_REDUCE, 0, 64);
  const int32_t g = add_group(q, ir::WORLD, {0, 1});
  add_rank(q, 0, {g});
  add_rank(q, 0, {g});
  EXPECT_THAT(execute_error(q, {.ranks = {0}}), HasSubstr("not executed"));
  EXPECT_THAT(execute_error(q, {.ranks = {5}}), HasSubstr("rank 5"));
  EXPECT_THAT(execute_error(q, {.iterations = 0}), HasSubstr("iterations"));
  const ExecutionResult r = execute(q, {.ranks = {1, 0}});
  EXPECT_EQ(r.ranks, (std::vector<int>{0, 1}));
}

TEST(ExecutorValidation, SubsetOfIndependentRanks) {
  ir::Program p;
  ir::RankClass* c = add_class(p, "r", 0, {"s"});
  add_compute(c->mutable_streams(0), 1000);
  for (int i = 0; i < 4; ++i) add_rank(p, 0);
  const ExecutionResult r = execute(p, {.ranks = {2}});
  ASSERT_EQ(r.spans.size(), 1u);
  EXPECT_EQ(r.spans[0].rank, 2);
}

// ---------------------------------------------------------------- CPU kernels

TEST(ExecutorCompute, RunsAGemmThroughItsCpuCase) {
  ir::Program p;
  ir::RankClass* c = add_class(p, "r", 0, {"compute"});
  add_gemm(c->mutable_streams(0), 64, 48, 32);
  add_gemm(c->mutable_streams(0), 64, 48, 32);  // same case, reused
  add_rank(p, 0);
  add_rank(p, 0);
  const ExecutionResult r = execute(p, {.iterations = 2});
  expect_well_formed(r);
  ASSERT_EQ(r.spans.size(), 4u);
  for (const ExecutedSpan& s : r.spans) EXPECT_GT(s.end_ns, s.start_ns);
}

// compute_time_scale stretches the kernel's own span (a slower device), as
// the CUDA backend's stretch kernel does; it must not leave a gap after it.
// Robust against preemption: the stretch of three kernels would have to be
// missing from all three gaps for the test to pass wrongly.
TEST(ExecutorCompute, ComputeTimeScaleStretchIsInsideTheKernelSpan) {
  constexpr double kScale = 4.0;
  ir::Program p;
  ir::RankClass* c = add_class(p, "r", 0, {"compute"});
  for (int i = 0; i < 3; ++i) add_gemm(c->mutable_streams(0), 128, 128, 128);
  add_compute(c->mutable_streams(0), 1000);  // reached after the last GEMM
  add_rank(p, 0)->set_compute_time_scale(kScale);
  const ExecutionResult r = execute(p, {});
  expect_well_formed(r);
  ASSERT_EQ(r.spans.size(), 4u);
  int small_gaps = 0;
  for (int op = 0; op < 3; ++op) {
    const ExecutedSpan& gemm = span(r, 0, 0, op);
    const std::int64_t gap = span(r, 0, 0, op + 1).ready_ns - gemm.end_ns;
    const std::int64_t stretch = static_cast<std::int64_t>((kScale - 1.0) * static_cast<double>(gemm.end_ns - gemm.start_ns));
    if (gap < stretch) ++small_gaps;
  }
  EXPECT_GE(small_gaps, 1) << "every GEMM is followed by a gap of at least (scale - 1) x its span";
}

TEST(ExecutorCompute, UnsupportedKernelFailsNamingTheOp) {
  ir::Program p;
  ir::RankClass* c = add_class(p, "r", 0, {"compute"});
  ir::Op* op = c->mutable_streams(0)->add_ops();
  op->mutable_compute()->set_op_class(ir::GEMM);
  op->mutable_compute()->add_shape(5);  // a GEMM needs 3 or 4 dimensions
  add_rank(p, 0);
  EXPECT_THAT(execute_error(p, {}), HasSubstr("rank 0 stream 0 (compute)"));
  // A negative dimension breaks the IR's rules: refused before any thread
  // starts, naming the field (ir::validate_program, as the simulator does).
  op->mutable_compute()->set_shape(0, -1);
  EXPECT_THAT(execute_error(p, {}), HasSubstr("classes[0].streams[0].ops[0].compute.shape[0]: must be >= 0, got -1"));
}

}  // namespace
}  // namespace lacuna::runtime
