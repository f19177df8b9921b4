#include "sim/network/topology.h"

#include <gtest/gtest.h>

#include "sim/core/error.h"

#include "sim/cost/test_clusters.h"
#include "sim/network/network_presets.h"
#include "sim/network/network_test_support.h"

namespace lacuna::network {
namespace {

TEST(NetworkPresets, EveryPresetResolvesAndBuilds) {
  for (const std::string& name : network_preset_names()) {
    scenario::Cluster c = cost::testing::hgx_hopper(384);
    c.mutable_network()->set_preset(name);
    const scenario::NetworkSpec net = resolve_network(c);
    EXPECT_FALSE(net.tiers().empty()) << name;
    EXPECT_GT(net.compute_slowdown_under_comm(), 0) << name;
    const Topology t(c, net);
    EXPECT_EQ(t.num_tiers(), net.tiers_size());
    EXPECT_GE(t.num_links(), 384u * 32u) << name;
  }
}

TEST(NetworkPresets, DefaultsFollowTheGpuPreset) {
  scenario::Cluster c = cost::testing::dgx_a100(2);
  c.set_preset("a100-80gb-sxm");
  EXPECT_EQ(resolve_network(c).preset(), "dgx-a100");
  c.set_preset("h200-sxm");
  EXPECT_EQ(resolve_network(c).preset(), "dgx-h100");
  c.set_preset("");
  EXPECT_EQ(resolve_network(c).preset(), "single-switch");
}

TEST(NetworkPresets, UserFieldsWinPerTier) {
  scenario::Cluster c = cost::testing::hgx_hopper(64);
  c.mutable_network()->set_preset("dgx-h100");
  auto* t0 = c.mutable_network()->add_tiers();
  t0->set_oversubscription(2);
  c.mutable_network()->add_tiers()->set_children(2);
  c.mutable_network()->add_tiers();
  const scenario::NetworkSpec net = resolve_network(c);
  ASSERT_EQ(net.tiers_size(), 3);
  EXPECT_EQ(net.tiers(0).children(), 32);  // from the preset
  EXPECT_EQ(net.tiers(0).oversubscription(), 2);
  EXPECT_EQ(net.tiers(1).children(), 2);
  EXPECT_EQ(net.tiers(1).name(), "spine");
}

void expect_error(const scenario::Cluster& c, const std::string& field, const std::string& words) {
  try {
    resolve_network(c);
    FAIL() << "accepted; expected an error on " << field;
  } catch (const Error& e) {
    EXPECT_EQ(e.where().field, field) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(NetworkPresets, BadFieldsNameTheField) {
  scenario::Cluster c = cost::testing::hgx_hopper(8);
  testing::two_tiers(c, 4, 1);
  c.mutable_network()->mutable_tiers(1)->set_oversubscription(0.5);
  expect_error(c, "cluster.network.tiers[1].oversubscription", "must be ≥ 1");
  c.mutable_network()->mutable_tiers(1)->set_oversubscription(1);
  c.mutable_network()->mutable_tiers(0)->set_children(0);
  expect_error(c, "cluster.network.tiers[0].children", "≥ 1");
  c.mutable_network()->mutable_tiers(0)->clear_children();
  c.mutable_network()->set_preset("single-switch");
  expect_error(c, "cluster.network.tiers[0].children", "not set");
  c.mutable_network()->mutable_tiers(0)->set_children(4);
  c.mutable_network()->mutable_tiers(0)->set_latency_us(-1);
  expect_error(c, "cluster.network.tiers[0].latency_us", "≥ 0");
  c.mutable_network()->mutable_tiers(0)->set_latency_us(1);
  c.mutable_network()->set_compute_slowdown_under_comm(-0.5);
  expect_error(c, "cluster.network.compute_slowdown_under_comm", "[0, 10]");
  c.mutable_network()->clear_compute_slowdown_under_comm();
  c.mutable_network()->set_preset("dgx-b200");
  expect_error(c, "cluster.network.preset",
               "\"dgx-a100\", \"dgx-h100\", \"megascale\", \"nvl72-quantum-x800\", \"nvl72-spectrum-x\", "
               "\"single-switch\"");
}

TEST(Topology, RailOptimizedTrunksAndPaths) {
  // 8 nodes, leaf of 2 nodes per rail (8 rails), spine of 2 leaf groups, core.
  scenario::Cluster c = cost::testing::hgx_hopper(8);
  auto* net = c.mutable_network();
  for (int i = 0; i < 3; ++i) {
    auto* t = net->add_tiers();
    t->set_name("tier" + std::to_string(i));
    t->set_children(2);
    t->set_oversubscription(i == 1 ? 4 : 1);
    t->set_latency_us(1);
  }
  const scenario::NetworkSpec spec = resolve_network(c);
  const Topology t(c, spec);
  // 64 GPUs × 2 NVLink + 64 NICs × 2 + leaf: 4 groups × 8 rails × 2 + spine: 2 groups × 2.
  EXPECT_EQ(t.num_links(), 128u + 128u + 64u + 4u);
  const double nic = 50e9 * 0.95;
  int leaf = 0, spine = 0;
  for (LinkId l = 0; l < t.num_links(); ++l) {
    const LinkInfo& info = t.links()[l];
    if (info.kind != LinkKind::kTrunkUp) continue;
    if (info.tier == 0) {
      ++leaf;
      EXPECT_DOUBLE_EQ(info.capacity_bytes_per_s, 2 * nic);  // 2 nodes on one rail, 1:1
      EXPECT_FALSE(t.binding(l));
    } else {
      ++spine;
      EXPECT_DOUBLE_EQ(info.capacity_bytes_per_s, 2 * 8 * 2 * nic / 4);  // 2 leaf groups × 8 rails / 4
      EXPECT_TRUE(t.binding(l));
    }
  }
  EXPECT_EQ(leaf, 32);
  EXPECT_EQ(spine, 2);
  EXPECT_EQ(t.common_tier(0, 1), 0);
  EXPECT_EQ(t.common_tier(0, 2), 1);
  EXPECT_EQ(t.common_tier(0, 7), 2);
  EXPECT_NEAR(t.switch_latency_s(0, 7), 5e-6, 1e-15);  // leaf, spine, core, spine, leaf
  std::vector<std::string> path;
  t.for_each_hop_link(0, 7, 3, [&](LinkId l) { path.push_back(t.links()[l].name); });
  const std::vector<std::string> want = {"node 0 nic 3 up",           "tier0 rail 3 group 0 up", "tier1 group 0 up",
                                         "tier1 group 1 down",        "tier0 rail 3 group 3 down",
                                         "node 7 nic 3 down"};
  EXPECT_EQ(path, want);
}

TEST(Topology, FatTreeFirstTierTakesAllNics) {
  scenario::Cluster c = cost::testing::hgx_hopper(4);
  c.set_topology(scenario::FAT_TREE);
  testing::two_tiers(c, 2, 1);
  const Topology t(c, resolve_network(c));
  EXPECT_EQ(t.num_links(), 64u + 64u + 4u);
  EXPECT_DOUBLE_EQ(t.links().back().capacity_bytes_per_s, 2 * 8 * 50e9 * 0.95);
  EXPECT_EQ(t.rail_of(5), 5);
}

TEST(Topology, MissingTopologyOnAMultiNodeCluster) {
  scenario::Cluster c = cost::testing::hgx_hopper(4);
  c.clear_topology();
  try {
    Topology t(c, resolve_network(c));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.where().field, "cluster.topology");
  }
}

}  // namespace
}  // namespace lacuna::network

namespace lacuna::network {
namespace {

// Where each link sits (what trace volume rules and reports select by).
TEST(Topology, LinksKnowTheirGpuRailAndNodes) {
  scenario::Cluster c = cost::testing::hgx_hopper(100);
  c.mutable_network()->set_preset("dgx-h100");  // leaf: 32 nodes per group, rail-optimized
  const Topology t(c, resolve_network(c));
  bool saw_leaf = false, saw_spine = false, saw_nvlink = false, saw_nic = false;
  for (const LinkInfo& l : t.links()) {
    if (l.name == "node 7 gpu 3 nvlink up") {
      saw_nvlink = true;
      EXPECT_EQ(l.gpu, 3);
      EXPECT_EQ(l.first_node, 7);
      EXPECT_EQ(l.last_node, 7);
    }
    if (l.name == "node 7 nic 5 down") {
      saw_nic = true;
      EXPECT_EQ(l.rail, 5);
      EXPECT_EQ(l.first_node, 7);
    }
    if (l.name == "leaf rail 3 group 1 up") {
      saw_leaf = true;
      EXPECT_EQ(l.rail, 3);
      EXPECT_EQ(l.first_node, 32);
      EXPECT_EQ(l.last_node, 63);
    }
    if (l.kind == LinkKind::kTrunkUp && l.tier == 1 && l.name.find("group 0 ") != std::string::npos) {
      saw_spine = true;
      EXPECT_EQ(l.rail, -1);
      EXPECT_EQ(l.first_node, 0);
      EXPECT_EQ(l.last_node, 99);  // 4 leaf groups of 32 = 128 nodes, clipped to the 100 there are
    }
  }
  EXPECT_TRUE(saw_leaf && saw_spine && saw_nvlink && saw_nic);
}

}  // namespace
}  // namespace lacuna::network
