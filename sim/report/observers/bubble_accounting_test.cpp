#include "sim/report/observers/bubble_accounting.h"

#include <gtest/gtest.h>

#include <tuple>

#include "sim/report/observers/test_fixture.h"

namespace lacuna::report {
namespace {

using testing::replay;
using testing::two_rank_program;

TEST(BubbleAccounting, AttributesEveryIdleNanosecondOfTheScriptedRun) {
  const ir::Program p = two_rank_program();
  BubbleAccounting acc;
  replay(p, {&acc});
  ASSERT_EQ(acc.ranks().size(), 2u);
  EXPECT_EQ(acc.iteration_time(), TimeNs(400));

  const RankAccount& r1 = acc.ranks()[1];
  EXPECT_EQ(r1.rank, 1);
  EXPECT_EQ(r1.busy, TimeNs(150));
  EXPECT_EQ(r1.bubble(Bubble::kPpWarmup), TimeNs(60));
  EXPECT_EQ(r1.bubble(Bubble::kPpExposed), TimeNs(70));
  EXPECT_EQ(r1.bubble(Bubble::kTpExposed), TimeNs(20));
  EXPECT_EQ(r1.bubble(Bubble::kPpOther), TimeNs(40));
  EXPECT_EQ(r1.bubble(Bubble::kPpCooldown), TimeNs(60));
  EXPECT_EQ(r1.bubble(Bubble::kDpExposed), TimeNs(0));
  EXPECT_EQ(r1.bubble(Bubble::kCpExposed), TimeNs(0));
  EXPECT_EQ(r1.busy_by_phase[ir::FORWARD], TimeNs(50));
  EXPECT_EQ(r1.busy_by_phase[ir::BACKWARD_INPUT], TimeNs(70));
  EXPECT_EQ(r1.busy_by_phase[ir::OPTIMIZER_STEP], TimeNs(30));

  const RankAccount& r0 = acc.ranks()[0];
  EXPECT_EQ(r0.busy, TimeNs(170));
  EXPECT_EQ(r0.bubble(Bubble::kPpOther), TimeNs(30));
  EXPECT_EQ(r0.bubble(Bubble::kPpCooldown), TimeNs(200));
  EXPECT_EQ(r0.bubble(Bubble::kPpWarmup), TimeNs(0));

  for (const RankAccount& r : acc.ranks()) {
    EXPECT_EQ(r.idle() + r.busy, acc.iteration_time()) << "rank " << r.rank;
  }
}

TEST(BubbleAccounting, TracksMemoryPeakAgainstCapacity) {
  const ir::Program p = two_rank_program();
  BubbleAccounting acc;
  replay(p, {&acc});
  EXPECT_EQ(acc.capacity(), Bytes(2000));
  for (const RankAccount& r : acc.ranks()) {
    EXPECT_EQ(r.baseline_memory, Bytes(1800));
    EXPECT_EQ(r.peak_memory, Bytes(2100));
    EXPECT_TRUE(r.over_capacity);
  }
}

TEST(BubbleAccounting, NoCapacityMeansNeverOver) {
  ir::Program p = two_rank_program();
  p.mutable_cluster()->mutable_gpu()->clear_hbm_capacity_gib();
  BubbleAccounting acc;
  replay(p, {&acc});
  EXPECT_EQ(acc.capacity(), Bytes(0));
  EXPECT_FALSE(acc.ranks()[1].over_capacity);
}

// Rank 0 alone: F [0,10], B [10,20], then a wait [20,80] released by the DP
// reduce-scatter `cause`; the run ends at `end`.
RankAccount account_final_dp_wait(const engine::WaitCause& cause, int64_t end) {
  const ir::Program p = two_rank_program();
  BubbleAccounting acc;
  engine::RunInfo info;
  info.program = &p;
  info.simulated_ranks = {0};
  info.represents = {{0}};
  acc.on_run_begin(info);
  acc.on_op_end(testing::span(p, 0, testing::kCompute, 1, 0, 0, 10));
  acc.on_op_end(testing::span(p, 0, testing::kCompute, 4, 10, 10, 20));
  const auto w = testing::span(p, 0, testing::kCompute, 5, 20, 20, 80);
  acc.on_op_end(w);
  acc.on_wait_end(w, cause);
  acc.on_run_end(TimeNs(end));
  return acc.ranks()[0];
}

TEST(BubbleAccounting, DpCollectiveCauseIsExposedDp) {
  // The reduce-scatter runs [30,80]; it was reached (ready 0) long before.
  const RankAccount r = account_final_dp_wait(testing::cause(testing::kDp, 0, 30, 80), 100);
  EXPECT_EQ(r.bubble(Bubble::kDpExposed), TimeNs(50));
  EXPECT_EQ(r.bubble(Bubble::kPpCooldown), TimeNs(10 + 20));
  EXPECT_EQ(r.idle() + r.busy, TimeNs(100));
}

// The same wait, but the reduce-scatter was queued on the DP stream behind
// another DP collective until 50 (reached at 50, peers ready at once): all of
// the wait is exposed DP, none of it is a pipeline stall. A releasing op that is
// reached early but starts late (peers not ready) leaves a stall.
TEST(BubbleAccounting, TimeQueuedBehindEarlierCommunicationIsExposed) {
  for (const auto& [ready, start, dp, cooldown] :
       {std::tuple{50, 50, 60, 0}, std::tuple{20, 50, 30, 30}, std::tuple{40, 50, 50, 10}}) {
    SCOPED_TRACE("cause ready " + std::to_string(ready) + " start " + std::to_string(start));
    engine::WaitCause c = testing::cause(testing::kDp, 0, start, 80);
    c.ready = TimeNs(ready);
    const RankAccount r = account_final_dp_wait(c, 80);
    EXPECT_EQ(r.bubble(Bubble::kDpExposed), TimeNs(dp));
    EXPECT_EQ(r.bubble(Bubble::kPpCooldown), TimeNs(cooldown));
    EXPECT_EQ(r.idle() + r.busy, TimeNs(80));
  }
}

TEST(BubbleAccounting, CommunicationOnTheComputeStreamIsExposed) {
  ir::Program p = two_rank_program();
  // Put a TP all-gather straight onto the compute stream (op 7).
  *p.mutable_classes(0)->mutable_streams(testing::kCompute)->add_ops() =
      p.classes(0).streams(testing::kTp).ops(0);
  BubbleAccounting acc;
  engine::RunInfo info;
  info.program = &p;
  info.simulated_ranks = {0};
  acc.on_run_begin(info);
  acc.on_op_end(testing::span(p, 0, testing::kCompute, 1, 0, 0, 10));
  acc.on_op_end(testing::span(p, 0, testing::kCompute, 7, 10, 25, 40));  // waits 15 for peers, runs 15
  acc.on_run_end(TimeNs(40));
  const RankAccount& r = acc.ranks()[0];
  EXPECT_EQ(r.represents, std::vector<int32_t>{0});
  EXPECT_EQ(r.bubble(Bubble::kTpExposed), TimeNs(15));
  EXPECT_EQ(r.bubble(Bubble::kPpCooldown), TimeNs(15));  // stall after the forward, no backward follows
  EXPECT_EQ(r.idle() + r.busy, TimeNs(40));
}

// Host overhead is [ready, issued] of each compute-stream op, whatever its
// kind; the rest of the op's idle time is attributed from `issued` as before.
TEST(BubbleAccounting, TheHostIssuingLateIsHostOverhead) {
  ir::Program p = two_rank_program();
  *p.mutable_classes(0)->mutable_streams(testing::kCompute)->add_ops() =
      p.classes(0).streams(testing::kTp).ops(0);  // a TP all-gather on the compute stream (op 7)
  BubbleAccounting acc;
  engine::RunInfo info;
  info.program = &p;
  info.simulated_ranks = {0};
  acc.on_run_begin(info);
  // F issued at 30: [0, 30] host, busy [30, 100].
  acc.on_op_end(testing::span(p, 0, testing::kCompute, 1, 0, 30, 30, 100));
  // The all-gather reached at 100, issued at 108, all members there at 125:
  // 8 host, 17 stall, 15 exposed TP.
  acc.on_op_end(testing::span(p, 0, testing::kCompute, 7, 100, 108, 125, 140));
  // A wait reached at 140 and issued at 150, released by the DP reduce-scatter
  // that its stream reached at 160 and that ran [170, 200]: 10 host, then as
  // without a host from 150: [150, 160] exposed (queued), [160, 170] stall,
  // [170, 200] exposed DP.
  const engine::OpSpan w = testing::span(p, 0, testing::kCompute, 5, 140, 150, 150, 200);
  engine::WaitCause c = testing::cause(testing::kDp, 0, 170, 200);
  c.ready = TimeNs(160);
  acc.on_op_end(w);
  acc.on_wait_end(w, c);
  // B issued at 230, after the wait released the stream at 200.
  acc.on_op_end(testing::span(p, 0, testing::kCompute, 4, 200, 230, 230, 250));
  acc.on_run_end(TimeNs(250));
  const RankAccount& r = acc.ranks()[0];
  EXPECT_EQ(r.bubble(Bubble::kHostOverhead), TimeNs(30 + 8 + 10 + 30));
  EXPECT_EQ(r.bubble(Bubble::kTpExposed), TimeNs(15));
  EXPECT_EQ(r.bubble(Bubble::kDpExposed), TimeNs(10 + 30));
  EXPECT_EQ(r.bubble(Bubble::kPpOther), TimeNs(17 + 10)) << "stalls before the backward";
  EXPECT_EQ(r.bubble(Bubble::kPpWarmup), TimeNs(0)) << "waiting for the host is not pipeline warm-up";
  EXPECT_EQ(r.busy, TimeNs(70 + 20));
  EXPECT_EQ(r.idle() + r.busy, TimeNs(250));
}

TEST(BubbleAccounting, AnIssuedTimeLeftUnsetMeansAHostThatWasNotLate) {
  // An observer source that never sets `issued` (0) must not invent host time.
  const ir::Program p = two_rank_program();
  BubbleAccounting acc;
  engine::RunInfo info;
  info.program = &p;
  info.simulated_ranks = {0};
  acc.on_run_begin(info);
  engine::OpSpan f = testing::span(p, 0, testing::kCompute, 1, 10, 20, 30);
  f.issued = TimeNs::zero();
  acc.on_op_end(f);
  acc.on_run_end(TimeNs(30));
  EXPECT_EQ(acc.ranks()[0].bubble(Bubble::kHostOverhead), TimeNs(0));
  EXPECT_EQ(acc.ranks()[0].bubble(Bubble::kPpWarmup), TimeNs(20));
}

TEST(BubbleAccounting, FoldModeAccountsOnlySimulatedRanks) {
  const ir::Program p = two_rank_program();
  BubbleAccounting acc;
  replay(p, {&acc}, /*fold=*/true);
  ASSERT_EQ(acc.ranks().size(), 1u);
  EXPECT_EQ(acc.ranks()[0].rank, 1);
  EXPECT_EQ(acc.ranks()[0].represents, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(acc.ranks()[0].bubble(Bubble::kPpWarmup), TimeNs(60));
}

TEST(BubbleAccounting, KeysAreStable) {
  EXPECT_EQ(bubble_key(Bubble::kPpWarmup), "pp_warmup");
  EXPECT_EQ(bubble_key(Bubble::kDpExposed), "dp_exposed");
  EXPECT_EQ(bubble_key(Bubble::kHostOverhead), "host_overhead");
  EXPECT_EQ(kAllBubbles.size(), static_cast<size_t>(kNumBubbles));
  for (int b = 0; b < kNumBubbles; ++b) EXPECT_EQ(kAllBubbles[static_cast<size_t>(b)], static_cast<Bubble>(b));
}

TEST(BubbleAccounting, HostOverheadIsShownForEveryProgram) {
  EXPECT_TRUE(bubble_shown(Bubble::kHostOverhead, false));
  EXPECT_TRUE(bubble_shown(Bubble::kPpExposed, false));
  EXPECT_FALSE(bubble_shown(Bubble::kBoundaryExposed, false));
  EXPECT_FALSE(bubble_shown(Bubble::kEncoderCommExposed, false));
  for (Bubble b : kAllBubbles) EXPECT_TRUE(bubble_shown(b, true, true)) << bubble_key(b);
}

// The MoE categories show only for MoE programs (dense and multimodal
// outputs keep their form), and every MoE program shows both.
TEST(BubbleAccounting, MoeCategoriesAreShownOnlyForMoePrograms) {
  EXPECT_EQ(bubble_key(Bubble::kMoeImbalance), "moe_imbalance");
  EXPECT_EQ(bubble_key(Bubble::kEpExposed), "ep_exposed");
  for (bool multimodal : {false, true}) {
    EXPECT_FALSE(bubble_shown(Bubble::kMoeImbalance, multimodal));
    EXPECT_FALSE(bubble_shown(Bubble::kEpExposed, multimodal));
    EXPECT_TRUE(bubble_shown(Bubble::kMoeImbalance, multimodal, true));
    EXPECT_TRUE(bubble_shown(Bubble::kEpExposed, multimodal, true));
    EXPECT_EQ(bubble_shown(Bubble::kBoundaryExposed, multimodal, true), multimodal);
  }
  EXPECT_EQ(exposed_category(CommKind::kEp), Bubble::kEpExposed);
}

}  // namespace
}  // namespace lacuna::report
