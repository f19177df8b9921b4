// NVLink domains larger than a node (docs/network.md#nvlink-domains): on a
// GB200 NVL72-shaped cluster (18 trays of 4 GPUs per 72-GPU NVLink domain,
// 4 NICs per tray) collectives inside a domain use NVLink only, even across
// trays, and never a NIC; groups spanning racks do use NICs; the flow model
// and the analytic model agree.
#include <gtest/gtest.h>

#include <string>

#include "sim/core/error.h"
#include "sim/cost/collective_model.h"
#include "sim/cost/group_shape.h"
#include "sim/network/collective_flows.h"
#include "sim/network/flow_comm_model.h"
#include "sim/network/network_test_support.h"

namespace lacuna::network {
namespace {

using testing::add_group;
using testing::program_on;
using testing::range;

// GB200 NVL72 racks, figures restated from the gb200-nvl72 preset (NVLink 5:
// 900 GB/s per direction; ConnectX-7: 400 Gb/s = 50 GB/s) so that the test
// does not move with preset edits.
scenario::Cluster nvl72(int64_t racks) {
  scenario::Cluster c = cost::testing::hgx_hopper(racks * 18);
  c.set_gpus_per_node(4);
  c.set_nics_per_node(4);
  c.set_nvlink_domain_gpus(72);
  c.set_max_nvlink_domain_gpus(576);
  cost::testing::set_link(c.mutable_nvlink(), 900, 0.6, 0.82);
  cost::testing::set_link(c.mutable_nic(), 50, 2.7, 0.95);
  testing::two_tiers(c, 72, 1, 0.5);
  return c;
}

const ir::CollectiveKind kKinds[] = {ir::ALL_REDUCE, ir::ALL_GATHER, ir::REDUCE_SCATTER,
                                     ir::ALL_TO_ALL, ir::BROADCAST,  ir::REDUCE};

// Runs one collective alone; returns its finish time and the links it used.
struct Alone {
  TimeNs at;
  std::vector<LinkStats> used;
};
Alone run_alone(const ir::Program& p, int32_t group, ir::CollectiveKind kind, int64_t bytes) {
  FlowCommModel m(p);
  m.reset();
  m.begin_collective(0_ns, 1, group, kind, bytes);
  Alone r;
  const auto u = m.take_updates();
  EXPECT_EQ(u.size(), 1u);
  if (!u.empty()) r.at = u.back().at;
  m.end(r.at, 1);
  r.used = m.link_stats(r.at);
  return r;
}

int64_t nic_or_trunk_links(const ir::Program& p, const std::vector<LinkStats>& used, double* nvlink_bytes) {
  FlowCommModel m(p);
  int64_t count = 0;
  *nvlink_bytes = 0;
  for (const LinkStats& s : used) {
    const LinkKind k = m.links()[s.link].kind;
    if (k == LinkKind::kNvlinkUp || k == LinkKind::kNvlinkDown) {
      *nvlink_bytes += s.bytes;
    } else if (s.bytes > 0) {
      ++count;
    }
  }
  return count;
}

TEST(NvlinkDomains, TopologyMapsTraysToRacks) {
  const ir::Program p = program_on(nvl72(2));
  FlowCommModel m(p);
  const Topology t(p.cluster(), m.network());
  EXPECT_EQ(t.num_nodes(), 36);
  EXPECT_EQ(t.nodes_per_domain(), 18);
  EXPECT_EQ(t.domain_of(17), 0);
  EXPECT_EQ(t.domain_of(18), 1);
  EXPECT_EQ(t.first_node_of_domain(1), 18);
}

TEST(NvlinkDomains, CollectivesInsideARackNeverTouchANic) {
  ir::Program p = program_on(nvl72(2));
  const int32_t tp8 = add_group(p, range(0, 8));           // 2 trays
  const int32_t rack = add_group(p, range(0, 72));         // the whole first rack, 18 trays
  const int32_t strided = add_group(p, range(73, 18, 4));  // one GPU per tray of the second rack
  for (int32_t g : {tp8, rack, strided}) {
    for (auto kind : kKinds) {
      for (int64_t bytes : {int64_t{64} << 10, int64_t{256} << 20}) {
        const Alone r = run_alone(p, g, kind, bytes);
        double nvlink_bytes = 0;
        EXPECT_EQ(nic_or_trunk_links(p, r.used, &nvlink_bytes), 0)
            << "group " << g << " " << ir::CollectiveKind_Name(kind) << " " << bytes << " B";
        EXPECT_GT(nvlink_bytes, 0.0);
      }
    }
  }
}

TEST(NvlinkDomains, TransfersAcrossTraysOfARackUseNvlink) {
  ir::Program p = program_on(nvl72(2));
  FlowCommModel m(p);
  m.reset();
  m.begin_transfer(0_ns, 1, 0, 71, 1 << 20);  // tray 0 → tray 17 of rack 0
  const auto u = m.take_updates();
  ASSERT_EQ(u.size(), 1u);
  m.end(u.back().at, 1);
  double nvlink_bytes = 0;
  EXPECT_EQ(nic_or_trunk_links(p, m.link_stats(u.back().at), &nvlink_bytes), 0);
  // The ledger integrates load over whole nanoseconds: within 0.1 %.
  EXPECT_NEAR(nvlink_bytes, 2.0 * (1 << 20), 2e-3 * (1 << 20)) << "the sender's NVLink up and the receiver's down";
  // The analytic p2p over NVLink: latency + bytes / (900 GB/s × 0.82).
  EXPECT_NEAR(u.back().at.seconds(), 0.6e-6 + (1 << 20) / (900e9 * 0.82), 2e-9);
}

TEST(NvlinkDomains, GroupsAcrossRacksUseNics) {
  ir::Program p = program_on(nvl72(2));
  const int32_t pair = add_group(p, {0, 72});          // same tray position, two racks
  const int32_t world = add_group(p, range(0, 144));
  for (int32_t g : {pair, world}) {
    for (auto kind : {ir::ALL_REDUCE, ir::ALL_GATHER, ir::ALL_TO_ALL}) {
      const Alone r = run_alone(p, g, kind, int64_t{64} << 20);
      double nvlink_bytes = 0;
      EXPECT_GT(nic_or_trunk_links(p, r.used, &nvlink_bytes), 0) << "group " << g << " " << ir::CollectiveKind_Name(kind);
    }
  }
}

// The analytic model (GroupShape over NVLink domains, NICs per domain) and the
// flow model give the same time for a collective alone (within the 1 ns of
// rounding), inside a rack and across racks.
TEST(NvlinkDomains, AnalyticAndFlowModelsAgree) {
  ir::Program p = program_on(nvl72(4));
  const int32_t groups[] = {
      add_group(p, range(0, 8)),        // TP 8 over 2 trays
      add_group(p, range(0, 72)),       // a rack
      add_group(p, range(2, 18, 4)),    // one GPU per tray of a rack (rail 2)
      add_group(p, range(5, 4, 72)),    // DP over 4 racks, one GPU each
      add_group(p, range(0, 288)),      // every GPU
      add_group(p, range(0, 16, 18)),   // 16 GPUs scattered over 4 racks
  };
  const cost::CollectiveModel model(cost::interconnect_from(p.cluster()));
  for (int32_t g : groups) {
    const auto& ranks = p.groups(g).ranks();
    const cost::GroupShape shape =
        cost::shape_of_ranks(p, std::span<const int32_t>(ranks.data(), static_cast<size_t>(ranks.size())));
    FlowCommModel fm(p);
    const Topology topology(p.cluster(), fm.network());
    CollectiveFlows flows(p, topology, fm.network());
    EXPECT_EQ(flows.shape(g), shape) << "group " << g << ": both sides see the same NVLink domains";
    for (auto kind : kKinds) {
      if (g == groups[4] && kind == ir::ALL_TO_ALL) continue;  // 288² flows: slow, covered by the 72-rank case
      for (int64_t bytes : {int64_t{4096}, int64_t{16} << 20, int64_t{1} << 30}) {
        const TimeNs want = TimeNs::from_seconds(model.collective_seconds(kind, bytes, shape));
        const TimeNs got = run_alone(p, g, kind, bytes).at;
        EXPECT_LE(std::abs((got - want).count()), 1)
            << "group " << g << " " << ir::CollectiveKind_Name(kind) << " " << bytes << " B: flow " << got.count()
            << " ns, analytic " << want.count();
      }
    }
  }
}

// A rack-wide all-reduce of 1 GiB runs at NVLink speed, with NVLS in the
// NVLink Switch trays as the HGX node's NVSwitch; the same 72 GPUs described as
// 18 separate nodes (no NVLink domain) would cross NICs at 4 × 50 GB/s per tray.
TEST(NvlinkDomains, ARackIsFasterThanEighteenSeparateTrays) {
  ir::Program rack = program_on(nvl72(1));
  const int32_t g = add_group(rack, range(0, 72));
  ir::Program trays = rack;
  trays.mutable_cluster()->clear_nvlink_domain_gpus();
  const TimeNs in_rack = run_alone(rack, g, ir::ALL_REDUCE, int64_t{1} << 30).at;
  const TimeNs split = run_alone(trays, g, ir::ALL_REDUCE, int64_t{1} << 30).at;
  EXPECT_LT(in_rack.seconds() * 2, split.seconds()) << in_rack.count() << " vs " << split.count();
  const cost::CollectiveModel model(cost::interconnect_from(rack.cluster()));
  const auto best = model.best(ir::ALL_REDUCE, int64_t{1} << 30, cost::GroupShape{72, 1, 72});
  EXPECT_EQ(best.algorithm, cost::nccl::Algorithm::kNvls);
}

TEST(NvlinkDomains, TopologyRefusesAPartialDomain) {
  scenario::Cluster c = nvl72(1);
  c.set_num_nodes(27);
  ir::Program p = program_on(c);
  try {
    FlowCommModel m(p);
    FAIL() << "accepted 27 trays in racks of 18";
  } catch (const Error& e) {
    EXPECT_EQ(e.where().field, "cluster.nvlink_domain_gpus");
  }
}

}  // namespace
}  // namespace lacuna::network
