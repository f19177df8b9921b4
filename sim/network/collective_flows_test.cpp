// On an uncontended, non-blocking network every collective and transfer takes
// exactly the analytic model's time (within the 1 ns of rounding).
#include "sim/network/collective_flows.h"

#include <gtest/gtest.h>

#include <string>

#include "sim/core/error.h"
#include "sim/cost/collective_model.h"
#include "sim/network/flow_comm_model.h"
#include "sim/network/network_test_support.h"
#include "sim/network/nccl_trees.h"

namespace lacuna::network {
namespace {

using cost::nccl::Algorithm;
using cost::nccl::Protocol;
using testing::add_group;
using testing::program_on;
using testing::range;

// Time of one collective alone on the flow model.
TimeNs alone(const ir::Program& p, int32_t group, ir::CollectiveKind kind, int64_t bytes) {
  FlowCommModel m(p);
  m.reset();
  m.begin_collective(0_ns, 7, group, kind, bytes);
  auto u = m.take_updates();
  EXPECT_EQ(u.size(), 1u);
  if (u.empty()) return TimeNs::zero();
  return u.back().at;
}

cost::GroupShape shape_of(const ir::Program& p, int32_t group) {
  FlowCommModel m(p);
  const Topology topology(p.cluster(), m.network());
  CollectiveFlows f(p, topology, m.network());
  return f.shape(group);
}

void expect_analytic(const ir::Program& p, int32_t group, ir::CollectiveKind kind, int64_t bytes,
                     const std::string& what) {
  const cost::CollectiveModel model(cost::interconnect_from(p.cluster()));
  const TimeNs want = TimeNs::from_seconds(model.collective_seconds(kind, bytes, shape_of(p, group)));
  const TimeNs got = alone(p, group, kind, bytes);
  EXPECT_LE(std::abs((got - want).count()), 1) << what << " " << ir::CollectiveKind_Name(kind) << " " << bytes
                                               << " B: flow " << got.count() << " ns, analytic " << want.count();
}

const ir::CollectiveKind kKinds[] = {ir::ALL_REDUCE, ir::ALL_GATHER, ir::REDUCE_SCATTER,
                                     ir::ALL_TO_ALL, ir::BROADCAST,  ir::REDUCE};
const int64_t kSizes[] = {4096, 256 << 10, 2 << 20, 16 << 20, 1LL << 30};

TEST(CollectiveFlows, EightGpusInOneNodeMatchAnalytic) {
  for (bool hopper : {false, true}) {
    const ir::Program base = program_on(hopper ? cost::testing::hgx_hopper(1) : cost::testing::dgx_a100(1));
    for (int n : {2, 4, 5, 8}) {
      ir::Program p = base;
      const int32_t g = add_group(p, range(0, n));
      for (auto kind : kKinds) {
        for (int64_t bytes : kSizes) expect_analytic(p, g, kind, bytes, (hopper ? "H100 " : "A100 ") + std::to_string(n));
      }
    }
  }
}

TEST(CollectiveFlows, MultiNodeGroupsMatchAnalytic) {
  for (int nodes : {2, 3, 4, 16, 64}) {
    ir::Program p = program_on(cost::testing::hgx_hopper(nodes));
    const int32_t world = add_group(p, range(0, nodes * 8));
    const int32_t dp = add_group(p, range(3, nodes, 8));       // one GPU per node (rail 3)
    const int32_t half = add_group(p, range(0, nodes * 2, 4));  // two GPUs per node
    for (auto kind : kKinds) {
      for (int64_t bytes : {int64_t{64} << 10, int64_t{16} << 20, int64_t{1} << 30}) {
        const std::string what = std::to_string(nodes) + " nodes";
        if (nodes <= 16 || kind != ir::ALL_TO_ALL) expect_analytic(p, world, kind, bytes, what + " world");
        expect_analytic(p, dp, kind, bytes, what + " dp");
        expect_analytic(p, half, kind, bytes, what + " 2/node");
      }
    }
  }
}

TEST(CollectiveFlows, EveryForcedAlgorithmAndProtocolMatchesItsCandidate) {
  struct Case {
    scenario::NcclAlgorithm algo;
    scenario::NcclProtocol proto;
    Algorithm a;
    Protocol pr;
  };
  const Case cases[] = {
      {scenario::NCCL_ALGO_RING, scenario::NCCL_PROTO_LL, Algorithm::kRing, Protocol::kLL},
      {scenario::NCCL_ALGO_RING, scenario::NCCL_PROTO_LL128, Algorithm::kRing, Protocol::kLL128},
      {scenario::NCCL_ALGO_RING, scenario::NCCL_PROTO_SIMPLE, Algorithm::kRing, Protocol::kSimple},
      {scenario::NCCL_ALGO_TREE, scenario::NCCL_PROTO_LL, Algorithm::kTree, Protocol::kLL},
      {scenario::NCCL_ALGO_TREE, scenario::NCCL_PROTO_LL128, Algorithm::kTree, Protocol::kLL128},
      {scenario::NCCL_ALGO_TREE, scenario::NCCL_PROTO_SIMPLE, Algorithm::kTree, Protocol::kSimple},
  };
  for (int nodes : {1, 2, 5, 8}) {
    for (const Case& c : cases) {
      scenario::Cluster cl = cost::testing::hgx_hopper(nodes);
      cl.mutable_network()->set_algorithm(c.algo);
      cl.mutable_network()->set_protocol(c.proto);
      ir::Program p = program_on(cl);
      const int32_t g = add_group(p, range(0, nodes * 8));
      const cost::CollectiveModel model(cost::interconnect_from(cl));
      for (int64_t bytes : {int64_t{1} << 20, int64_t{256} << 20}) {
        double want_s = -1;
        for (const cost::Candidate& x : model.candidates(ir::ALL_REDUCE, shape_of(p, g))) {
          if (x.algorithm == c.a && x.protocol == c.pr) want_s = x.seconds(bytes);
        }
        ASSERT_GT(want_s, 0);
        const TimeNs got = alone(p, g, ir::ALL_REDUCE, bytes);
        EXPECT_LE(std::abs((got - TimeNs::from_seconds(want_s)).count()), 1)
            << nodes << " nodes, algo " << c.algo << " proto " << c.proto;
      }
    }
  }
  // NVLS, forced, inside a node.
  scenario::Cluster cl = cost::testing::hgx_hopper(1);
  cl.mutable_network()->set_algorithm(scenario::NCCL_ALGO_NVLS);
  ir::Program p = program_on(cl);
  const int32_t g = add_group(p, range(0, 8));
  const cost::CollectiveModel model(cost::interconnect_from(cl));
  for (const cost::Candidate& x : model.candidates(ir::ALL_REDUCE, shape_of(p, g))) {
    if (x.algorithm != Algorithm::kNvls) continue;
    const TimeNs got = alone(p, g, ir::ALL_REDUCE, 4096);
    EXPECT_LE(std::abs((got - TimeNs::from_seconds(x.seconds(4096))).count()), 1);
  }
}

TEST(CollectiveFlows, ImpossibleOverridesNameTheField) {
  scenario::Cluster cl = cost::testing::hgx_hopper(2);
  cl.mutable_network()->set_algorithm(scenario::NCCL_ALGO_NVLS);
  ir::Program p = program_on(cl);
  const int32_t g = add_group(p, range(0, 16));
  FlowCommModel m(p);
  m.reset();
  try {
    m.begin_collective(0_ns, 1, g, ir::ALL_REDUCE, 1 << 20);
    FAIL() << "NVLS across nodes accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.where().field, "cluster.network.algorithm");
    EXPECT_NE(std::string(e.what()).find("NVLS"), std::string::npos) << e.what();
  }
  // All-gather has no NVLS here: NCCL runs its ring.
  m.begin_collective(0_ns, 2, g, ir::ALL_GATHER, 1 << 20);
  EXPECT_EQ(m.take_updates().size(), 1u);

  scenario::Cluster c2 = cost::testing::hgx_hopper(1);
  c2.mutable_network()->set_algorithm(scenario::NCCL_ALGO_NVLS);
  c2.mutable_network()->set_protocol(scenario::NCCL_PROTO_LL);
  ir::Program p2 = program_on(c2);
  const int32_t g2 = add_group(p2, range(0, 8));
  FlowCommModel m2(p2);
  try {
    m2.begin_collective(0_ns, 1, g2, ir::ALL_REDUCE, 1 << 20);
    FAIL() << "NVLS with LL accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.where().field, "cluster.network.protocol");
  }
}

TEST(CollectiveFlows, TransfersMatchAnalyticPlusSwitchTiers) {
  scenario::Cluster cl = cost::testing::hgx_hopper(4);
  testing::two_tiers(cl, 2, 1.0, 0.5);
  ir::Program p = program_on(cl);
  const cost::CollectiveModel model(cost::interconnect_from(cl));
  const int64_t bytes = 64 << 20;
  struct Case {
    int32_t src, dst;
    double switch_us;
  };
  // Same node; same leaf group (one leaf); across groups (leaf, spine, leaf).
  for (const Case& c : {Case{0, 5, 0.0}, Case{0, 8, 0.5}, Case{3, 19, 1.5}}) {
    FlowCommModel m(p);
    m.reset();
    m.begin_transfer(0_ns, 9, c.src, c.dst, bytes);
    const auto u = m.take_updates();
    ASSERT_EQ(u.size(), 1u);
    const bool same = c.src / 8 == c.dst / 8;
    const TimeNs want = TimeNs::from_seconds(model.p2p_seconds(bytes, same) + c.switch_us * 1e-6);
    EXPECT_LE(std::abs((u[0].at - want).count()), 1) << c.src << " → " << c.dst;
  }
}

TEST(NcclTrees, DoubleBinaryTreeBalancesNodes) {
  for (int32_t n : {2, 3, 4, 7, 8, 13, 64}) {
    std::vector<int> degree(static_cast<size_t>(n), 0);
    for (int32_t t = 0; t < 2; ++t) {
      int roots = 0;
      for (int32_t r = 0; r < n; ++r) {
        const int32_t p = dtree_parent(n, t, r);
        if (p < 0) {
          ++roots;
          continue;
        }
        ASSERT_GE(p, 0);
        ASSERT_LT(p, n);
        ASSERT_NE(p, r);
        ++degree[r];
        ++degree[p];
      }
      EXPECT_EQ(roots, 1);
    }
    // Edges per node over both trees (each edge moves S/2 each way): at most 4.
    for (int d : degree) EXPECT_LE(d, 4) << n;
  }
  EXPECT_EQ(btree_parent(8, 0), -1);
  EXPECT_EQ(btree_parent(8, 1), 2);
  EXPECT_EQ(btree_parent(8, 2), 4);
  EXPECT_EQ(btree_parent(8, 4), 0);
}

}  // namespace
}  // namespace lacuna::network
