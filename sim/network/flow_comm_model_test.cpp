// The flow-level model through the engine's CommunicationModel interface,
// without the engine: contention on shared NICs, oversubscribed tiers,
// update semantics, observers, statistics.
#include "sim/network/flow_comm_model.h"

#include <gtest/gtest.h>

#include "sim/core/error.h"

#include <map>

#include "sim/cost/collective_model.h"
#include "sim/network/network_test_support.h"

namespace lacuna::network {
namespace {

using testing::add_group;
using testing::program_on;
using testing::range;

// Runs the model like the engine: begin ops at t = 0 (or given times), pop
// the earliest completion, end it, apply updates, until all are done.
struct Driver {
  explicit Driver(engine::CommunicationModel& m) : model(m) { model.reset(); }

  void apply() {
    for (const engine::CompletionUpdate& u : model.take_updates()) {
      EXPECT_GE(u.at, now);
      due[u.token] = u.at;
    }
  }
  void collective(uint64_t token, int32_t group, ir::CollectiveKind kind, int64_t bytes) {
    model.begin_collective(now, token, group, kind, bytes);
    apply();
  }
  void transfer(uint64_t token, int32_t src, int32_t dst, int64_t bytes) {
    model.begin_transfer(now, token, src, dst, bytes);
    apply();
  }
  // Runs to completion; returns each token's end.
  std::map<uint64_t, TimeNs> run() {
    std::map<uint64_t, TimeNs> ended;
    while (!due.empty()) {
      auto first = due.begin();
      for (auto it = due.begin(); it != due.end(); ++it) {
        if (it->second < first->second) first = it;
      }
      now = first->second;
      const uint64_t token = first->first;
      due.erase(first);
      ended[token] = now;
      model.end(now, token);
      apply();
    }
    return ended;
  }

  engine::CommunicationModel& model;
  TimeNs now;
  std::map<uint64_t, TimeNs> due;
};

// NIC latency + the single-switch preset's one switch traversal.
constexpr double kP2pLatency = 2.7e-6 + 0.5e-6;

double nic_bytes_per_s(const scenario::Cluster& c) { return c.nic().bandwidth_gb_per_s() * 1e9 * c.nic().efficiency(); }

TEST(FlowCommModel, DpRingAndPpTransferShareANic) {
  scenario::Cluster cl = cost::testing::hgx_hopper(2);
  cl.mutable_network()->set_algorithm(scenario::NCCL_ALGO_RING);
  cl.mutable_network()->set_protocol(scenario::NCCL_PROTO_SIMPLE);
  ir::Program p = program_on(cl);
  const int32_t dp = add_group(p, {0, 8});  // GPU 0 of both nodes: rail 0
  const int64_t bytes = 512 << 20;
  const double nic = nic_bytes_per_s(cl);
  const cost::CollectiveModel analytic(cost::interconnect_from(cl));
  const cost::Candidate ring = analytic.best(ir::ALL_REDUCE, bytes, cost::GroupShape{2, 2, 1});
  const double alone_s = static_cast<double>(bytes) / ring.alg_bytes_per_s;
  ASSERT_NEAR(alone_s, static_cast<double>(bytes) / nic, 1e-12);  // 2 ranks: S over each NIC

  FlowCommModel m(p);
  {  // Same rail: the ring's hop 0 → 8 and the transfer 0 → 8 share node 0's NIC 0 up and node 1's NIC 0 down.
    Driver d(m);
    d.collective(1, dp, ir::ALL_REDUCE, bytes);
    d.transfer(2, 0, 8, bytes);
    const auto ended = d.run();
    // Both at nic / 2 until both finish together: 2S / nic.
    const double shared_s = 2.0 * static_cast<double>(bytes) / nic;
    EXPECT_NEAR(ended.at(1).seconds(), shared_s + ring.latency_s, 2e-9);
    EXPECT_NEAR(ended.at(2).seconds(), shared_s + kP2pLatency, 2e-9);
  }
  {  // Different rails (GPU 1 → GPU 9 uses NIC 1): no interference.
    Driver d(m);
    d.collective(1, dp, ir::ALL_REDUCE, bytes);
    d.transfer(2, 1, 9, bytes);
    const auto ended = d.run();
    EXPECT_NEAR(ended.at(1).seconds(), alone_s + ring.latency_s, 2e-9);
    EXPECT_NEAR(ended.at(2).seconds(), static_cast<double>(bytes) / nic + kP2pLatency, 2e-9);
  }
  {  // The transfer starts halfway: the ring slows down for the overlap only.
    Driver d(m);
    d.collective(1, dp, ir::ALL_REDUCE, bytes);
    d.now = TimeNs::from_seconds(alone_s / 2);
    d.transfer(2, 0, 8, bytes);
    const auto ended = d.run();
    // Ring: S/2 left at nic/2 → finishes alone_s/2 + alone_s later.
    EXPECT_NEAR(ended.at(1).seconds(), 1.5 * alone_s + ring.latency_s, 3e-9);
  }
}

TEST(FlowCommModel, OversubscribedTierSlowsOnlyCrossGroupTraffic) {
  // 4 nodes, leaf groups of 2 with 2:1 oversubscription: a leaf's rail-0 trunk
  // holds one NIC's worth.
  scenario::Cluster cl = cost::testing::hgx_hopper(4);
  testing::two_tiers(cl, 2, 2.0);
  ir::Program p = program_on(cl);
  const double nic = nic_bytes_per_s(cl);
  const int64_t bytes = 256 << 20;
  const double one = static_cast<double>(bytes) / nic + 2.7e-6;
  FlowCommModel m(p);
  {  // Two cross-group transfers on rail 0 share group 0's trunk: half speed.
    Driver d(m);
    d.transfer(1, 0, 16, bytes);   // node 0 → node 2
    d.transfer(2, 8, 24, bytes);   // node 1 → node 3
    const auto ended = d.run();
    EXPECT_NEAR(ended.at(1).seconds(), 2.0 * (one - 2.7e-6) + 2.7e-6, 2e-9);
    EXPECT_NEAR(ended.at(2).seconds(), 2.0 * (one - 2.7e-6) + 2.7e-6, 2e-9);
  }
  {  // Same-group transfers never touch a trunk.
    Driver d(m);
    d.transfer(1, 0, 8, bytes);    // node 0 → node 1
    d.transfer(2, 16, 24, bytes);  // node 2 → node 3
    const auto ended = d.run();
    EXPECT_NEAR(ended.at(1).seconds(), one, 2e-9);
    EXPECT_NEAR(ended.at(2).seconds(), one, 2e-9);
  }
  {  // One cross-group transfer alone fits the trunk.
    Driver d(m);
    d.transfer(1, 0, 16, bytes);
    EXPECT_NEAR(d.run().at(1).seconds(), one, 2e-9);
  }
  {  // Different rails have their own leaf trunks.
    Driver d(m);
    d.transfer(1, 0, 16, bytes);
    d.transfer(2, 9, 25, bytes);  // GPU 1: rail 1
    const auto ended = d.run();
    EXPECT_NEAR(ended.at(2).seconds(), one, 2e-9);
  }
}

TEST(FlowCommModel, UpdatesFollowTheContract) {
  ir::Program p = program_on(cost::testing::hgx_hopper(2));
  const int32_t tp = add_group(p, range(0, 8));
  const int32_t solo = add_group(p, {3});
  FlowCommModel m(p);
  engine::CommunicationModel& cm = m;
  cm.reset();
  cm.begin_transfer(0_ns, 1, 0, 8, 1 << 30);
  auto u = cm.take_updates();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0].token, 1u);
  const TimeNs first = u[0].at;
  EXPECT_TRUE(cm.take_updates().empty());  // taken once
  // A second transfer on the same NIC: both reported, the first later now.
  cm.begin_transfer(10_ns, 2, 0, 8, 1 << 20);
  u = cm.take_updates();
  ASSERT_EQ(u.size(), 2u);
  std::map<uint64_t, TimeNs> at;
  for (const auto& x : u) at[x.token] = x.at;
  EXPECT_GT(at[1], first);
  // Unrelated in-node collective: only itself.
  cm.begin_collective(20_ns, 3, tp, ir::ALL_REDUCE, 1 << 20);
  u = cm.take_updates();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0].token, 3u);
  // Zero bytes and a group of one finish at once.
  cm.begin_collective(30_ns, 4, tp, ir::ALL_GATHER, 0);
  cm.begin_collective(30_ns, 5, solo, ir::ALL_REDUCE, 1 << 20);
  u = cm.take_updates();
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(u[0].at, 30_ns);
  EXPECT_EQ(u[1].at, 30_ns);
  cm.end(30_ns, 4);
  cm.end(30_ns, 5);
  // The second (smaller) transfer ends first and the first speeds up.
  ASSERT_LT(at[2], at[1]);
  cm.end(at[2], 2);
  u = cm.take_updates();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0].token, 1u);
  EXPECT_THROW(cm.end(at[2], 99), Error);
  EXPECT_THROW(cm.begin_transfer(at[2], 1, 0, 8, 10), Error);  // token 1 still in flight
}

TEST(FlowCommModel, ResetGivesTheSameRunAgain) {
  ir::Program p = program_on(cost::testing::hgx_hopper(4));
  const int32_t world = add_group(p, range(0, 32));
  const int32_t dp = add_group(p, range(2, 4, 8));
  FlowCommModel m(p);
  std::map<uint64_t, TimeNs> runs[2];
  for (auto& r : runs) {
    Driver d(m);
    d.collective(1, world, ir::ALL_REDUCE, 300 << 20);
    d.collective(2, dp, ir::REDUCE_SCATTER, 100 << 20);
    d.transfer(3, 2, 10, 50 << 20);
    d.now = 1000_us;
    d.transfer(4, 10, 18, 70 << 20);
    r = d.run();
  }
  EXPECT_EQ(runs[0], runs[1]);
}

struct Recorder : LinkObserver {
  void on_links(const std::vector<LinkInfo>& l) override {
    ++announcements;
    links = l.size();
  }
  void on_link_load(TimeNs t, LinkId link, double load) override { events.push_back({t, link, load}); }
  struct Event {
    TimeNs t;
    LinkId link;
    double load;
  };
  int announcements = 0;
  size_t links = 0;
  std::vector<Event> events;
};

TEST(FlowCommModel, ObserversAndStatistics) {
  scenario::Cluster cl = cost::testing::hgx_hopper(2);
  ir::Program p = program_on(cl);
  FlowCommModel m(p);
  Recorder rec;
  m.add_link_observer(&rec);
  Driver d(m);
  EXPECT_EQ(rec.announcements, 1);
  EXPECT_EQ(rec.links, m.links().size());
  const int64_t bytes = 100 << 20;
  d.transfer(1, 0, 8, bytes);
  d.transfer(2, 0, 9, bytes);  // GPU 0's rail 0 again, to node 1's NIC 0
  const auto ended = d.run();
  // Time order; LinkId order within one time; loads within capacity.
  for (size_t i = 1; i < rec.events.size(); ++i) {
    ASSERT_LE(rec.events[i - 1].t, rec.events[i].t);
    if (rec.events[i - 1].t == rec.events[i].t) {
      ASSERT_LT(rec.events[i - 1].link, rec.events[i].link);
    }
  }
  for (const auto& e : rec.events) EXPECT_LE(e.load, m.links()[e.link].capacity_bytes_per_s * (1 + 1e-9));
  ASSERT_FALSE(rec.events.empty());
  EXPECT_EQ(rec.events.back().load, 0.0);  // idle at the end
  // Statistics: node 0's NIC 0 up carried both transfers.
  const TimeNs end = std::max(ended.at(1), ended.at(2));
  const auto stats = m.link_stats(end);
  ASSERT_FALSE(stats.empty());
  EXPECT_EQ(m.links()[stats[0].link].name, "node 0 nic 0 up");
  EXPECT_NEAR(stats[0].bytes, 2.0 * bytes, 1e-6 * bytes);
  EXPECT_NEAR(stats[0].peak_utilisation, 1.0, 1e-9);
  EXPECT_GT(stats[0].saturated, TimeNs::zero());
  EXPECT_LE(stats[0].mean_utilisation, 1.0);
  EXPECT_GT(stats[0].mean_utilisation, 0.9);
  for (const auto& s : stats) EXPECT_GT(s.bytes, 0);
  // The two NVLink-free transfers never touch NVLink.
  for (const auto& s : stats) EXPECT_NE(m.links()[s.link].kind, LinkKind::kNvlinkUp);
}

TEST(FlowCommModel, NameAndSlowdown) {
  scenario::Cluster cl = cost::testing::hgx_hopper(2);
  cl.set_preset("h100-sxm");
  ir::Program p = program_on(cl);
  FlowCommModel m(p);
  EXPECT_EQ(m.network().preset(), "dgx-h100");
  EXPECT_NE(std::string(m.name()).find("3 switch tiers"), std::string::npos) << m.name();
  EXPECT_DOUBLE_EQ(m.compute_slowdown_under_comm(), 0.1);
  cl.mutable_network()->set_compute_slowdown_under_comm(0.25);
  ir::Program p2 = program_on(cl);
  EXPECT_DOUBLE_EQ(FlowCommModel(p2).compute_slowdown_under_comm(), 0.25);
}

TEST(FlowCommModel, RanksOutsideTheClusterAreErrors) {
  ir::Program p = program_on(cost::testing::hgx_hopper(2));
  p.mutable_ranks(5)->set_node(7);
  try {
    FlowCommModel m(p);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.where().field, "ranks[5].node");
  }
}

}  // namespace
}  // namespace lacuna::network
