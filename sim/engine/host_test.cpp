// The host side of a stream (Op.host_ns, Op.host_sync; docs/engine.md#host):
// closed forms of launch-bound and kernel-bound streams, synchronisation,
// and how a late host delays each kind of op.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "sim/engine/engine_test_support.h"
#include "sim/engine/simulator.h"

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

struct HostRun {
  RecordingObserver obs;
  SimulationResult result;
};

HostRun run(const ir::Program& p, SimulationOptions options = {}) {
  ClosedFormCost cost;
  Simulator sim(p, cost, options);
  HostRun r;
  sim.add_observer(&r.obs);
  r.result = sim.run();
  return r;
}

ir::Op& host(ir::Op& op, int64_t host_ns, bool sync = false) {
  op.set_host_ns(host_ns);
  op.set_host_sync(sync);
  return op;
}

// One rank, one stream of n kernels of d ns, each issued by the host in h ns.
ir::Program kernel_stream(int n, int64_t d, int64_t h, bool sync) {
  ir::Program p;
  ir::RankClass* c = add_class(p, "r", 0, {"compute"});
  for (int i = 0; i < n; ++i) host(add_compute(c->mutable_streams(0), d), h, sync);
  add_rank(p, 0);
  return p;
}

TEST(Host, KernelStreamClosedForms) {
  struct Case {
    int n;
    int64_t d, h;
  };
  for (const Case& c : std::vector<Case>{{1, 100, 30}, {10, 100, 30}, {10, 100, 100}, {10, 100, 150},
                                         {7, 40, 1000}, {5, 100, 0}, {1, 0, 70}}) {
    SCOPED_TRACE(::testing::Message() << "n " << c.n << " d " << c.d << " h " << c.h);
    // Kernel-bound (h <= d): only the first launch is exposed. Launch-bound:
    // every launch is, and the last kernel runs after it.
    const HostRun free_run = run(kernel_stream(c.n, c.d, c.h, false));
    EXPECT_EQ(free_run.result.end_time.count(), c.h <= c.d ? c.h + c.n * c.d : c.n * c.h + c.d);
    // The host waits for each kernel before launching the next.
    const HostRun sync_run = run(kernel_stream(c.n, c.d, c.h, true));
    EXPECT_EQ(sync_run.result.end_time.count(), c.n * (c.h + c.d));
    // A late issue costs one event; a host that is ahead costs none.
    const int late = c.h == 0 ? 0 : c.h <= c.d ? 1 : c.n;
    EXPECT_EQ(free_run.result.events, static_cast<uint64_t>(c.n + late));
    EXPECT_EQ(sync_run.result.events, static_cast<uint64_t>(c.h == 0 ? c.n : 2 * c.n));
  }
}

TEST(Host, SpansOfALaunchBoundStream) {
  // h = 150 > d = 100: op i is reached at i·h + d, issued and started at (i + 1)·h.
  const HostRun r = run(kernel_stream(4, 100, 150, false));
  ASSERT_EQ(r.obs.spans.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    const OpSpan& s = *r.obs.find(0, 0, i);
    EXPECT_EQ(s.ready.count(), i == 0 ? 0 : i * 150 + 100) << i;
    EXPECT_EQ(s.issued.count(), (i + 1) * 150) << i;
    EXPECT_EQ(s.start, s.issued) << i;
    EXPECT_EQ(s.end.count(), (i + 1) * 150 + 100) << i;
  }
}

TEST(Host, SpansOfAKernelBoundStream) {
  // h = 30 < d = 100: the host runs ahead after the first launch, so
  // issued = ready from the second op on.
  const HostRun r = run(kernel_stream(4, 100, 30, false));
  for (int i = 0; i < 4; ++i) {
    const OpSpan& s = *r.obs.find(0, 0, i);
    EXPECT_EQ(s.ready.count(), i == 0 ? 0 : 30 + i * 100) << i;
    EXPECT_EQ(s.issued.count(), 30 + i * 100) << i;
    EXPECT_EQ(s.start, s.issued) << i;
  }
}

// Two ranks in one TP group; per rank:
//   compute: 0 kernel 100 (host 10)  1 record e0 (host 20: the NCCL launch)
//            2 wait e1 >= 1          3 kernel 100 (host 50, host_sync = sync)
//   tp_comm: 0 wait e0 >= 1  1 all-reduce 1000 ns  2 record e1
ir::Program collective_then_kernel(bool sync) {
  ir::Program p;
  p.add_group_slots()->set_name("tp");
  ir::RankClass* c = add_class(p, "r", 2, {"compute", "tp_comm"});
  ir::Stream* compute = c->mutable_streams(0);
  ir::Stream* tp = c->mutable_streams(1);
  host(add_compute(compute, 100), 10);
  host(add_record(compute, 0), 20);
  add_wait(compute, 1, 1);
  host(add_compute(compute, 100), 50, sync);
  add_wait(tp, 0, 1);
  add_collective(tp, ir::ALL_REDUCE, 0, 4096, 1000);
  add_record(tp, 1);
  const int32_t g = add_group(p, ir::TP, {0, 1});
  add_rank(p, 0, {g});
  add_rank(p, 0, {g});
  return p;
}

TEST(Host, SyncAfterAWaitForALongCollectiveExposesTheLaunch) {
  // Kernel [10, 110]; the record at 110 (its host was done at 30); the
  // all-reduce [110, 1110]; then the host, which waited for the stream, needs
  // 50 ns more: the kernel runs [1160, 1260].
  const HostRun r = run(collective_then_kernel(true));
  EXPECT_EQ(r.result.end_time, TimeNs(1260));
  const OpSpan& k = *r.obs.find(0, 0, 3);
  EXPECT_EQ(k.ready, TimeNs(1110));
  EXPECT_EQ(k.issued, TimeNs(1160));
  EXPECT_EQ(k.start, TimeNs(1160));
  const OpSpan& rec = *r.obs.find(0, 0, 1);
  EXPECT_EQ(rec.ready, TimeNs(110));
  EXPECT_EQ(rec.issued, TimeNs(110)) << "the host issued the record at 30, before the stream got there";
}

TEST(Host, AHostRunningAheadDuringAWaitHidesTheLaunch) {
  // Without host_sync the host issued the second kernel at 30 + 50 = 80, while
  // the stream waited for the all-reduce: it starts the moment the wait ends.
  const HostRun r = run(collective_then_kernel(false));
  EXPECT_EQ(r.result.end_time, TimeNs(1210));
  const OpSpan& k = *r.obs.find(0, 0, 3);
  EXPECT_EQ(k.ready, TimeNs(1110));
  EXPECT_EQ(k.issued, TimeNs(1110));
}

// Streams a: kernel 100, record e0; b: wait e0 >= 1 (host h), kernel 10.
ir::Program late_wait(int64_t h) {
  ir::Program p;
  ir::RankClass* c = add_class(p, "r", 1, {"a", "b"});
  add_compute(c->mutable_streams(0), 100);
  add_record(c->mutable_streams(0), 0);
  host(add_wait(c->mutable_streams(1), 0, 1), h);
  add_compute(c->mutable_streams(1), 10);
  add_rank(p, 0);
  return p;
}

TEST(Host, AWaitBeginsWaitingWhenIssued) {
  {
    // Issued at 50: it blocks until the record at 100.
    const HostRun r = run(late_wait(50));
    ASSERT_EQ(r.obs.waits.size(), 1u);
    const auto& w = r.obs.waits[0];
    EXPECT_EQ(w.span.ready, TimeNs(0));
    EXPECT_EQ(w.span.issued, TimeNs(50));
    EXPECT_EQ(w.span.start, TimeNs(50));
    EXPECT_EQ(w.span.end, TimeNs(100));
    EXPECT_TRUE(w.cause.valid);
  }
  {
    // Issued at 500: the event was recorded meanwhile, so it passes at once.
    const HostRun r = run(late_wait(500));
    const auto& w = r.obs.waits[0];
    EXPECT_EQ(w.span.issued, TimeNs(500));
    EXPECT_EQ(w.span.start, TimeNs(500));
    EXPECT_EQ(w.span.end, TimeNs(500));
    EXPECT_FALSE(w.cause.valid);
    EXPECT_EQ(r.result.end_time, TimeNs(510));
  }
}

TEST(Host, CommunicationArrivesWhenIssued) {
  // A collective starts when its last member's host issued it; a transfer
  // when both sides were issued.
  ir::Program p;
  p.add_group_slots()->set_name("dp");
  p.add_peer_slots()->set_name("peer");
  ir::RankClass* late = add_class(p, "late", 0, {"comm", "p2p"});
  host(add_collective(late->mutable_streams(0), ir::ALL_REDUCE, 0, 64, 1000), 300);
  host(add_send(late->mutable_streams(1), 0, 64, 0, 7, 40), 200);
  ir::RankClass* early = add_class(p, "early", 0, {"comm", "p2p"});
  host(add_collective(early->mutable_streams(0), ir::ALL_REDUCE, 0, 64, 1000), 100);
  host(add_recv(early->mutable_streams(1), 0, 64, 0, 7), 700);
  const int32_t g = add_group(p, ir::DP, {0, 1});
  add_rank(p, 0, {g}, {1});
  add_rank(p, 1, {g}, {0});
  const HostRun r = run(p);
  const OpSpan& early_ar = *r.obs.find(1, 0, 0);
  EXPECT_EQ(early_ar.issued, TimeNs(100));
  EXPECT_EQ(early_ar.start, TimeNs(300));
  EXPECT_EQ(early_ar.end, TimeNs(1300));
  ASSERT_EQ(r.obs.transfers.size(), 1u);
  const auto& [send, recv] = r.obs.transfers[0];
  EXPECT_EQ(send.issued, TimeNs(200));
  EXPECT_EQ(recv.issued, TimeNs(700));
  EXPECT_EQ(send.start, TimeNs(700));
  EXPECT_EQ(send.end, TimeNs(740));
}

TEST(Host, EachStreamHasItsOwnHostClockResetEveryRun) {
  ir::Program p;
  ir::RankClass* c = add_class(p, "r", 0, {"a", "b"});
  for (int i = 0; i < 3; ++i) host(add_compute(c->mutable_streams(0), 10), 100);
  for (int i = 0; i < 2; ++i) host(add_compute(c->mutable_streams(1), 10), 100);
  add_rank(p, 0);
  ClosedFormCost cost;
  Simulator sim(p, cost);
  RecordingObserver first, second;
  sim.add_observer(&first);
  EXPECT_EQ(sim.run().end_time, TimeNs(310));
  EXPECT_EQ(first.find(0, 1, 1)->end, TimeNs(210)) << "stream b's host does not queue behind stream a's";
  Simulator again(p, cost);
  again.add_observer(&second);
  again.run();
  EXPECT_EQ(sim.run().end_time, TimeNs(310)) << "the host clock starts at 0 on every run";
  ASSERT_EQ(second.spans.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(first.spans[i].op, second.spans[i].op);
    EXPECT_EQ(first.spans[i].issued, second.spans[i].issued);
    EXPECT_EQ(first.spans[i].start, second.spans[i].start);
  }
}

TEST(Host, AnIssuedKernelThenCompetesForComputeSlots) {
  // One slot; rank 0's kernel is issued at 50, rank 1's at 10. Rank 1 takes
  // the slot first [10, 110]; rank 0 waits for it until 110.
  ir::Program p;
  ir::RankClass* slow = add_class(p, "slow host", 0, {"compute"});
  host(add_compute(slow->mutable_streams(0), 0, 100), 50);
  ir::RankClass* fast = add_class(p, "fast host", 0, {"compute"});
  host(add_compute(fast->mutable_streams(0), 0, 100), 10);
  add_rank(p, 0);
  add_rank(p, 1);
  const HostRun r = run(p, SimulationOptions{.compute_slots = 1});
  EXPECT_EQ(r.obs.find(1, 0, 0)->start, TimeNs(10));
  const OpSpan& s = *r.obs.find(0, 0, 0);
  EXPECT_EQ(s.ready, TimeNs(0));
  EXPECT_EQ(s.issued, TimeNs(50));
  EXPECT_EQ(s.start, TimeNs(110));
  EXPECT_EQ(r.result.end_time, TimeNs(210));
}

TEST(Host, AKernelIssuedLateIsSlowedOnlyWhileCommunicationRemains) {
  // An all-reduce runs [0, 1000]; a 1000 ns kernel issued at 500 runs twice
  // as slow (f = 1) until 1000 (250 ns of work), then at full speed: 1750.
  // Issued at 0 it would do 500 ns of work by 1000 and end at 1500.
  for (const int64_t h : {int64_t{0}, int64_t{500}}) {
    ir::Program p;
    p.add_group_slots()->set_name("tp");
    ir::RankClass* c = add_class(p, "r", 0, {"compute", "tp_comm"});
    host(add_compute(c->mutable_streams(0), 1000), h);
    add_collective(c->mutable_streams(1), ir::ALL_REDUCE, 0, 64, 1000);
    const int32_t g = add_group(p, ir::TP, {0, 1});
    add_rank(p, 0, {g});
    add_rank(p, 0, {g});
    const HostRun r = run(p, SimulationOptions{.compute_slowdown_under_comm = 1.0});
    EXPECT_EQ(r.obs.find(0, 0, 0)->end, TimeNs(h == 0 ? 1500 : 1750)) << "host " << h;
  }
}

TEST(Host, HostTimeBeyondInt64IsAnError) {
  // Each op's host time is within validation's bound (10^15 ns); 9,300 of
  // them pass int64's 9.22e18 ns.
  ir::Program p = kernel_stream(9300, 10, 1'000'000'000'000'000, false);
  ClosedFormCost cost;
  Simulator sim(p, cost);
  try {
    sim.run();
    ADD_FAILURE() << "expected an overflow error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("rank 0 stream compute op 9223: host_ns"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("int64 nanosecond range"));
  }
}

}  // namespace
}  // namespace lacuna::engine
