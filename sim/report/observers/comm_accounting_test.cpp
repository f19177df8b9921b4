#include "sim/report/observers/comm_accounting.h"

#include <gtest/gtest.h>

#include "sim/cost/collective_model.h"
#include "sim/cost/cost_model.h"
#include "sim/engine/simulator.h"
#include "sim/report/observers/test_fixture.h"

namespace lacuna::report {
namespace {

// Streams of the class below.
constexpr int kTpStream = 0, kDpStream = 1, kSendStream = 2, kRecvStream = 3;

ir::Op collective(ir::CollectiveKind kind, int slot, int64_t bytes, int64_t fixed_ns = 0) {
  ir::Op op;
  op.mutable_collective()->set_kind(kind);
  op.mutable_collective()->set_group_slot(slot);
  op.mutable_collective()->set_bytes(bytes);
  op.mutable_collective()->set_fixed_duration_ns(fixed_ns);
  return op;
}

// Four ranks of one class, all on one TP group; DP pairs {0,1} {2,3} bound to
// the "dp_cp" slot (their group has the narrower kind DP, as with cp = 1);
// each rank sends 50 MB to its pair partner (r xor 1) and receives from it.
//   tp: AR 1 GB (1 ms), AR 1 GB (2 ms), AG 400 MB (500 µs), AR 0 B
//   dp: RS 200 MB (100 µs)
ir::Program four_rank_program() {
  ir::Program p;
  p.mutable_info()->set_num_ranks(4);
  ir::Slot* tp = p.add_group_slots();
  tp->set_name("tp");
  tp->set_kind(ir::TP);
  ir::Slot* dp = p.add_group_slots();
  dp->set_name("dp_cp");
  dp->set_kind(ir::DP_CP);
  p.add_peer_slots()->set_name("pp_next");
  p.add_peer_slots()->set_name("pp_prev");
  ir::Group* g = p.add_groups();
  g->set_kind(ir::TP);
  for (int r = 0; r < 4; ++r) g->add_ranks(r);
  for (int pair = 0; pair < 2; ++pair) {
    ir::Group* d = p.add_groups();
    d->set_kind(ir::DP);
    d->add_ranks(2 * pair);
    d->add_ranks(2 * pair + 1);
  }
  ir::RankClass* cls = p.add_classes();
  ir::Stream* tps = cls->add_streams();
  tps->set_name("tp");
  tps->set_kind(ir::TP_COMM);
  *tps->add_ops() = collective(ir::ALL_REDUCE, 0, 1'000'000'000, 1'000'000);
  *tps->add_ops() = collective(ir::ALL_REDUCE, 0, 1'000'000'000, 2'000'000);
  *tps->add_ops() = collective(ir::ALL_GATHER, 0, 400'000'000, 500'000);
  *tps->add_ops() = collective(ir::ALL_REDUCE, 0, 0, 1);
  ir::Stream* dps = cls->add_streams();
  dps->set_name("dp");
  dps->set_kind(ir::DP_COMM);
  *dps->add_ops() = collective(ir::REDUCE_SCATTER, 1, 200'000'000, 100'000);
  ir::Stream* send = cls->add_streams();
  send->set_name("pp_send");
  send->set_kind(ir::PP_SEND);
  ir::Op s;
  s.mutable_send()->set_peer_slot(0);
  s.mutable_send()->set_bytes(50'000'000);
  s.mutable_send()->set_fixed_duration_ns(25'000);
  *send->add_ops() = s;
  ir::Stream* recv = cls->add_streams();
  recv->set_name("pp_recv");
  recv->set_kind(ir::PP_RECV);
  ir::Op rv;
  rv.mutable_recv()->set_peer_slot(1);
  rv.mutable_recv()->set_bytes(50'000'000);
  *recv->add_ops() = rv;
  for (int r = 0; r < 4; ++r) {
    ir::RankBinding* b = p.add_ranks();
    b->add_group(0);
    b->add_group(1 + r / 2);
    b->add_peer(r ^ 1);
    b->add_peer(r ^ 1);
  }
  return p;
}

// Replays what the engine would report, with the fixed durations above.
void replay(const ir::Program& p, CommAccounting& acc, bool fold) {
  engine::RunInfo info;
  info.program = &p;
  if (fold) {  // as the engine folds it: rank 0 and its p2p partner
    info.simulated_ranks = {0, 1};
    info.represents = {{0, 2}, {1, 3}};
  } else {
    info.simulated_ranks = {0, 1, 2, 3};
    info.represents = {{0}, {1}, {2}, {3}};
  }
  acc.on_run_begin(info);
  for (int32_t r : info.simulated_ranks) {
    acc.on_op_end(testing::span(p, r, kTpStream, 0, 0, 10, 1'000'010));  // waited 10 ns for peers: not counted
    acc.on_op_end(testing::span(p, r, kTpStream, 1, 1'000'010, 1'000'010, 3'000'010));
    acc.on_op_end(testing::span(p, r, kTpStream, 2, 3'000'010, 3'000'010, 3'500'010));
    acc.on_op_end(testing::span(p, r, kTpStream, 3, 3'500'010, 3'500'010, 3'500'011));
    acc.on_op_end(testing::span(p, r, kDpStream, 0, 0, 0, 100'000));
  }
  // 50 MB in 25 µs: 2 TB/s.
  for (int32_t r : info.simulated_ranks) {
    const engine::OpSpan send = testing::span(p, r, kSendStream, 0, 0, 1000, 26'000);
    const engine::OpSpan recv = testing::span(p, r ^ 1, kRecvStream, 0, 0, 1000, 26'000);
    acc.on_op_end(send);
    acc.on_op_end(recv);
    acc.on_transfer(send, recv);
  }
  acc.on_run_end(TimeNs(3'500'011));
}

const CommRow* find(const CommSummary& s, std::string_view group, std::string_view op) {
  for (const CommRow& r : s.rows) {
    if (r.group == group && r.op == op) return &r;
  }
  return nullptr;
}

TEST(CommAccounting, BusBandwidthIsBytesTimesFactorOverTime) {
  const ir::Program p = four_rank_program();
  CommAccounting acc;
  replay(p, acc, false);
  const CommSummary s = acc.summary();
  EXPECT_FALSE(s.folded);
  EXPECT_EQ(s.simulated_ranks, 4);

  const CommRow* ag = find(s, "tp", "all_gather");
  ASSERT_NE(ag, nullptr);
  // 400 MB · (n−1)/n = 0.75 over 500 µs = 600 GB/s; algbw 800 GB/s.
  EXPECT_DOUBLE_EQ(cost::bus_bandwidth_factor(ir::ALL_GATHER, 4), 0.75);
  EXPECT_DOUBLE_EQ(ag->mean_busbw(), 400e6 * 0.75 / 500e-6);
  EXPECT_DOUBLE_EQ(ag->min_busbw, 400e6 * 0.75 / 500e-6);
  EXPECT_DOUBLE_EQ(ag->mean_algbw(), 400e6 / 500e-6);
  EXPECT_EQ(ag->min_group_size, 4);
  EXPECT_EQ(ag->max_group_size, 4);

  const CommRow* ar = find(s, "tp", "all_reduce");
  ASSERT_NE(ar, nullptr);
  // Per rank: 1 GB in 1 ms and 1 GB in 2 ms (factor 2·3/4 = 1.5), plus a
  // zero-byte one that counts but has no bandwidth. Time-weighted mean:
  // 2 GB · 1.5 / 3 ms = 1 TB/s; the slower one: 1 GB · 1.5 / 2 ms = 750 GB/s.
  EXPECT_EQ(ar->ranks, 4);
  EXPECT_EQ(ar->ops, 12);
  EXPECT_DOUBLE_EQ(ar->ops_per_rank(), 3.0);
  EXPECT_EQ(ar->bytes, 8'000'000'000);
  EXPECT_DOUBLE_EQ(ar->bytes_per_rank(), 2e9);
  EXPECT_EQ(ar->time, TimeNs(4 * 3'000'001));
  EXPECT_DOUBLE_EQ(ar->seconds_per_rank(), 3'000'001e-9);
  EXPECT_DOUBLE_EQ(ar->mean_busbw(), 2e9 * 1.5 / 3e-3);
  EXPECT_DOUBLE_EQ(ar->min_busbw, 1e9 * 1.5 / 2e-3);

  // The dp_cp slot's group has kind DP: the row reads "dp".
  const CommRow* rs = find(s, "dp", "reduce_scatter");
  ASSERT_NE(rs, nullptr);
  EXPECT_EQ(rs->min_group_size, 2);
  EXPECT_DOUBLE_EQ(rs->mean_busbw(), 200e6 * 0.5 / 100e-6);
  EXPECT_EQ(find(s, "dp_cp", "reduce_scatter"), nullptr);

  // A transfer counts once, for its sender; busbw = algbw.
  const CommRow* pp = find(s, "pp", "send_recv");
  ASSERT_NE(pp, nullptr);
  EXPECT_EQ(pp->ops, 4);
  EXPECT_EQ(pp->ranks, 4);
  EXPECT_EQ(pp->min_group_size, 2);
  EXPECT_EQ(pp->time, TimeNs(4 * 25'000));
  EXPECT_DOUBLE_EQ(pp->mean_busbw(), 50e6 / 25e-6);
  EXPECT_DOUBLE_EQ(pp->mean_busbw(), pp->mean_algbw());
}

TEST(CommAccounting, RowsAreOrderedByGroupKindThenCollectiveKind) {
  const ir::Program p = four_rank_program();
  CommAccounting acc;
  replay(p, acc, false);
  std::vector<std::string> order;
  for (const CommRow& r : acc.summary().rows) order.push_back(std::string(r.group) + " " + std::string(r.op));
  EXPECT_EQ(order, (std::vector<std::string>{"tp all_reduce", "tp all_gather", "dp reduce_scatter", "pp send_recv"}));
}

TEST(CommAccounting, FoldCountsSimulatedRanksOnly) {
  const ir::Program p = four_rank_program();
  CommAccounting acc;
  replay(p, acc, true);
  const CommSummary s = acc.summary();
  EXPECT_TRUE(s.folded);
  EXPECT_EQ(s.simulated_ranks, 2);
  EXPECT_EQ(s.num_gpus, 4);
  const CommRow* ar = find(s, "tp", "all_reduce");
  ASSERT_NE(ar, nullptr);
  EXPECT_EQ(ar->ranks, 2);
  EXPECT_EQ(ar->ops, 6);  // not weighted by the ranks each stands for
  EXPECT_DOUBLE_EQ(ar->ops_per_rank(), 3.0);
  EXPECT_EQ(find(s, "pp", "send_recv")->ops, 2);
}

// The cost model must not be asked: every op has a fixed duration.
class NoCost : public cost::CostModel {
 public:
  std::string_view name() const override { return "fixed durations"; }
  TimeNs compute(const ir::Compute&) const override { return fail(); }
  TimeNs collective(ir::CollectiveKind, int64_t, const cost::GroupShape&) const override { return fail(); }
  TimeNs p2p(int64_t, bool) const override { return TimeNs(25'000); }

 private:
  static TimeNs fail() {
    ADD_FAILURE() << "cost model asked for a fixed-duration op";
    return TimeNs(1);
  }
};

TEST(CommAccounting, OnTheEngineFixedDurationsGiveTheExactBusBandwidth) {
  for (bool fold : {false, true}) {
    SCOPED_TRACE(fold);
    const ir::Program p = four_rank_program();
    NoCost cost;
    engine::Simulator sim(p, cost, {.fold = fold});
    CommAccounting acc;
    sim.add_observer(&acc);
    sim.run();
    const CommSummary s = acc.summary();
    EXPECT_EQ(s.folded, fold);
    const CommRow* ag = find(s, "tp", "all_gather");
    ASSERT_NE(ag, nullptr);
    EXPECT_DOUBLE_EQ(ag->mean_busbw(), 400e6 * 0.75 / 500e-6);
    const CommRow* ar = find(s, "tp", "all_reduce");
    ASSERT_NE(ar, nullptr);
    EXPECT_DOUBLE_EQ(ar->mean_busbw(), 2e9 * 1.5 / 3e-3);
    EXPECT_DOUBLE_EQ(ar->ops_per_rank(), 3.0);
    const CommRow* pp = find(s, "pp", "send_recv");
    ASSERT_NE(pp, nullptr);
    EXPECT_DOUBLE_EQ(pp->mean_busbw(), 50e6 / 25e-6);
  }
}

}  // namespace
}  // namespace lacuna::report
