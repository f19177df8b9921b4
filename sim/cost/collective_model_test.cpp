// The collective model against nccl-tests' published bus bandwidths
// (models-and-hardware.md §3) and NCCL's latency closed forms.
#include "sim/cost/collective_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/core/error.h"
#include "sim/cost/test_clusters.h"

namespace lacuna::cost {
namespace {

using nccl::Algorithm;
using nccl::Protocol;
using testing::dgx_a100;
using testing::hgx_hopper;

constexpr int64_t kLarge = int64_t{4} << 30;  // nccl-tests' large-message plateau

GroupShape one_node(int32_t n) { return {n, 1, n}; }
GroupShape nodes_of(int32_t nodes, int32_t per_node) { return {nodes * per_node, nodes, per_node}; }

// nccl-tests busbw = S / t × factor.
double busbw_gb(const CollectiveModel& m, ir::CollectiveKind kind, int64_t bytes, const GroupShape& g) {
  return static_cast<double>(bytes) / m.collective_seconds(kind, bytes, g) * bus_bandwidth_factor(kind, g.size) / 1e9;
}

const Candidate& find(const Candidates& all, Algorithm a, Protocol p) {
  for (const Candidate& c : all) {
    if (c.algorithm == a && c.protocol == p) return c;
  }
  throw std::runtime_error("no such candidate");
}

TEST(BusBandwidthFactor, MatchesNcclTestsDefinitions) {
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(ir::ALL_REDUCE, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(ir::ALL_GATHER, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(ir::REDUCE_SCATTER, 16), 15.0 / 16);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(ir::ALL_TO_ALL, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(ir::BROADCAST, 8), 1.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(ir::REDUCE, 8), 1.0);
}

// 8×A100 SXM ring all-reduce ≈230 GB/s busbw.
TEST(CollectiveModel, EightA100RingAllReduce) {
  CollectiveModel m(interconnect_from(dgx_a100(1)));
  EXPECT_NEAR(busbw_gb(m, ir::ALL_REDUCE, kLarge, one_node(8)), 230.0, 23.0);
  EXPECT_EQ(m.best(ir::ALL_REDUCE, kLarge, one_node(8)).algorithm, Algorithm::kRing);
}

// 8×H100 ring all-reduce and the non-all-reduce ops ≈365–370 GB/s busbw.
TEST(CollectiveModel, EightH100RingAndOtherOps) {
  auto cluster = hgx_hopper(1);
  cluster.set_nvls(false);
  CollectiveModel m(interconnect_from(cluster));
  for (auto kind : {ir::ALL_REDUCE, ir::ALL_GATHER, ir::REDUCE_SCATTER, ir::ALL_TO_ALL}) {
    SCOPED_TRACE(ir::CollectiveKind_Name(kind));
    EXPECT_NEAR(busbw_gb(m, kind, kLarge, one_node(8)), 367.5, 36.75);
  }
}

// 8×H100 all-reduce with NVLS (NCCL's default there) ≈480 GB/s; by GPU count
// 4→8: 370, 420, 440, 460, 480.
TEST(CollectiveModel, H100NvlsAllReduceByGpuCount) {
  CollectiveModel m(interconnect_from(hgx_hopper(1)));
  const double published[] = {370, 420, 440, 460, 480};
  double previous = 0;
  for (int32_t n = 4; n <= 8; ++n) {
    SCOPED_TRACE(n);
    const double bw = busbw_gb(m, ir::ALL_REDUCE, kLarge, one_node(n));
    EXPECT_NEAR(bw, published[n - 4], 0.1 * published[n - 4]);
    EXPECT_GT(bw, previous);
    previous = bw;
    EXPECT_EQ(m.best(ir::ALL_REDUCE, kLarge, one_node(n)).algorithm, Algorithm::kNvls);
  }
}

// 8×H200 NVLS all-reduce ≈475 GB/s (same NVLink as H100).
TEST(CollectiveModel, H200NvlsAllReduce) {
  CollectiveModel m(interconnect_from(hgx_hopper(1, 4800)));
  EXPECT_NEAR(busbw_gb(m, ir::ALL_REDUCE, kLarge, one_node(8)), 475.0, 47.5);
}

// NVLS is an in-node algorithm for all-reduce only.
TEST(CollectiveModel, NvlsOnlyForSingleNodeAllReduce) {
  CollectiveModel m(interconnect_from(hgx_hopper(2)));
  for (const Candidate& c : m.candidates(ir::ALL_REDUCE, nodes_of(2, 8))) EXPECT_NE(c.algorithm, Algorithm::kNvls);
  for (const Candidate& c : m.candidates(ir::ALL_GATHER, one_node(8))) EXPECT_EQ(c.algorithm, Algorithm::kRing);
}

// 2 × DGX A100 (16 GPUs, 8 × 200G HDR each) all-reduce ≈192 GB/s: the ring's
// node crossing runs at the node's 8 NICs (8 × 24), below NVLink's 231.
TEST(CollectiveModel, TwoDgxA100AllReduceIsNicBound) {
  CollectiveModel m(interconnect_from(dgx_a100(2)));
  const double bw = busbw_gb(m, ir::ALL_REDUCE, kLarge, nodes_of(2, 8));
  EXPECT_NEAR(bw, 192.0, 19.2);

  auto half_nics = dgx_a100(2);
  half_nics.set_nics_per_node(4);
  CollectiveModel m4(interconnect_from(half_nics));
  EXPECT_NEAR(busbw_gb(m4, ir::ALL_REDUCE, kLarge, nodes_of(2, 8)), bw / 2, 0.02 * bw);
}

// One rank per node (a DP group across TP=8 nodes) drives one NIC.
TEST(CollectiveModel, OneRankPerNodeRingRunsAtOneNic) {
  CollectiveModel m(interconnect_from(hgx_hopper(16)));
  EXPECT_NEAR(busbw_gb(m, ir::ALL_GATHER, kLarge, nodes_of(16, 1)), 47.5, 4.75);
  EXPECT_NEAR(busbw_gb(m, ir::REDUCE_SCATTER, kLarge, nodes_of(16, 1)), 47.5, 4.75);
}

// H100 NDR 400G per-NIC p2p 46–49 GB/s.
TEST(CollectiveModel, H100PerNicPointToPoint) {
  CollectiveModel m(interconnect_from(hgx_hopper(2)));
  const double gb_per_s = static_cast<double>(kLarge) / m.p2p_seconds(kLarge, false) / 1e9;
  EXPECT_NEAR(gb_per_s, 47.5, 4.75);
  EXPECT_GT(gb_per_s, 46.0 * 0.9);
  EXPECT_LT(gb_per_s, 49.0 * 1.1);
}

// All-to-all across nodes does not aggregate NICs: busbw ≈ one NIC (46–49).
TEST(CollectiveModel, CrossNodeAllToAllRunsAtOneNicPerRank) {
  CollectiveModel m(interconnect_from(hgx_hopper(16)));
  EXPECT_NEAR(busbw_gb(m, ir::ALL_TO_ALL, kLarge, nodes_of(16, 8)), 47.5, 4.75);
  // A ring over the same ranks does aggregate them.
  EXPECT_GT(busbw_gb(m, ir::ALL_GATHER, kLarge, nodes_of(16, 8)), 5 * 47.5);
}

// §3: 8-GPU single-node ring all-reduce latency: LL 6.6 + 14×0.6 ≈ 15 µs,
// Simple 8.4 + 14×3.4 ≈ 56 µs.
TEST(CollectiveModel, SingleNodeRingLatencyClosedForm) {
  CollectiveModel m(interconnect_from(dgx_a100(1)));
  const Candidates all = m.candidates(ir::ALL_REDUCE, one_node(8));
  EXPECT_NEAR(find(all, Algorithm::kRing, Protocol::kLL).latency_s * 1e6, 6.6 + 14 * 0.6, 1e-9);
  EXPECT_NEAR(find(all, Algorithm::kRing, Protocol::kLL128).latency_s * 1e6, 14.0 + 14 * 1.9, 1e-9);
  EXPECT_NEAR(find(all, Algorithm::kRing, Protocol::kSimple).latency_s * 1e6, 8.4 + 14 * 3.4, 1e-9);
  // A tiny all-reduce costs the LL latency.
  EXPECT_NEAR(m.collective_seconds(ir::ALL_REDUCE, 8, one_node(8)) * 1e6, 15.0, 0.01);
  // All-gather: n − 1 steps.
  const Candidates ag = m.candidates(ir::ALL_GATHER, one_node(8));
  EXPECT_NEAR(find(ag, Algorithm::kRing, Protocol::kSimple).latency_s * 1e6, 8.4 + 7 * 3.4, 1e-9);
}

// Ring across nodes: 2(nNodes − 1) of the 2(n − 1) steps use the network hop.
TEST(CollectiveModel, MultiNodeRingAndTreeLatencyClosedForm) {
  CollectiveModel m(interconnect_from(dgx_a100(4)));
  const Candidates two = m.candidates(ir::ALL_REDUCE, nodes_of(2, 8));
  EXPECT_NEAR(find(two, Algorithm::kRing, Protocol::kSimple).latency_s * 1e6, 8.4 + 28 * 3.4 + 2 * 14.0, 1e-9);
  EXPECT_NEAR(find(two, Algorithm::kRing, Protocol::kLL).latency_s * 1e6, 6.6 + 28 * 0.6 + 2 * 2.7, 1e-9);
  // Tree: base + 2·((ppn − 1)·intra + log2(nNodes)·inter).
  const Candidates four = m.candidates(ir::ALL_REDUCE, nodes_of(4, 8));
  EXPECT_NEAR(find(four, Algorithm::kTree, Protocol::kSimple).latency_s * 1e6, 8.4 + 2 * (7 * 4.0 + 2 * 14.0), 1e-9);
  EXPECT_NEAR(find(four, Algorithm::kTree, Protocol::kLL).latency_s * 1e6, 6.8 + 2 * (7 * 0.6 + 2 * 5.0), 1e-9);
}

// Protocol fractions relative to Simple, as in NCCL's tuning.cc.
TEST(CollectiveModel, ProtocolBandwidthFractions) {
  CollectiveModel m(interconnect_from(dgx_a100(2)));
  const Candidates ar = m.candidates(ir::ALL_REDUCE, one_node(8));
  const double simple = find(ar, Algorithm::kRing, Protocol::kSimple).alg_bytes_per_s;
  EXPECT_DOUBLE_EQ(find(ar, Algorithm::kRing, Protocol::kLL).alg_bytes_per_s, simple / 4);
  EXPECT_DOUBLE_EQ(find(ar, Algorithm::kRing, Protocol::kLL128).alg_bytes_per_s, simple * 0.92);
  // Tree: 0.92 of the bus bandwidth, halved; ring algbw = bus · n / (2(n − 1)).
  const double bus = simple * 14 / 8;
  EXPECT_DOUBLE_EQ(find(ar, Algorithm::kTree, Protocol::kSimple).alg_bytes_per_s, bus * 0.92 * 0.5);
  // In-node all-gather LL runs at 1/3, across nodes at 1/4.
  const double ag_simple = find(m.candidates(ir::ALL_GATHER, one_node(8)), Algorithm::kRing, Protocol::kSimple).alg_bytes_per_s;
  EXPECT_DOUBLE_EQ(find(m.candidates(ir::ALL_GATHER, one_node(8)), Algorithm::kRing, Protocol::kLL).alg_bytes_per_s,
                   ag_simple / 3);
  const Candidates ag2 = m.candidates(ir::ALL_GATHER, nodes_of(2, 8));
  EXPECT_DOUBLE_EQ(find(ag2, Algorithm::kRing, Protocol::kLL).alg_bytes_per_s,
                   find(ag2, Algorithm::kRing, Protocol::kSimple).alg_bytes_per_s / 4);
}

// Small messages are latency-bound (LL), large ones bandwidth-bound (Simple).
TEST(CollectiveModel, ProtocolSwitchesWithMessageSize) {
  CollectiveModel m(interconnect_from(dgx_a100(1)));
  EXPECT_EQ(m.best(ir::ALL_REDUCE, 1 << 10, one_node(8)).protocol, Protocol::kLL);
  EXPECT_EQ(m.best(ir::ALL_REDUCE, 4 << 20, one_node(8)).protocol, Protocol::kLL128);
  EXPECT_EQ(m.best(ir::ALL_REDUCE, int64_t{1} << 30, one_node(8)).protocol, Protocol::kSimple);
  // Time grows with size and achieved bandwidth never falls.
  double previous_t = 0, previous_bw = 0;
  for (int64_t bytes = 8; bytes <= (int64_t{8} << 30); bytes *= 4) {
    const double t = m.collective_seconds(ir::ALL_REDUCE, bytes, one_node(8));
    EXPECT_GT(t, previous_t);
    EXPECT_GE(bytes / t, previous_bw * (1 - 1e-12));
    previous_t = t;
    previous_bw = bytes / t;
  }
  // With NVLS on Hopper: LL for tiny messages, NVLS for large ones.
  CollectiveModel h(interconnect_from(hgx_hopper(1)));
  EXPECT_EQ(h.best(ir::ALL_REDUCE, 1 << 10, one_node(8)).protocol, Protocol::kLL);
  EXPECT_EQ(h.best(ir::ALL_REDUCE, 64 << 20, one_node(8)).algorithm, Algorithm::kNvls);
}

// 1984 H200 (248 × 8, 8 NICs/node), 512 MB all-reduce ≈350 GB/s, sometimes
// < 300. Latency over 3966 ring steps makes the tree win; its 0.92 × ½
// bandwidth gives ≈312 (−11%), so the tolerance here is ±15%.
TEST(CollectiveModel, LargeScaleAllReduceUsesTree) {
  CollectiveModel m(interconnect_from(hgx_hopper(248, 4800)));
  const GroupShape g = nodes_of(248, 8);
  const int64_t bytes = 512'000'000;
  EXPECT_EQ(m.best(ir::ALL_REDUCE, bytes, g).algorithm, Algorithm::kTree);
  EXPECT_NEAR(busbw_gb(m, ir::ALL_REDUCE, bytes, g), 350.0, 52.5);
}

TEST(CollectiveModel, TrivialCasesCostNothing) {
  CollectiveModel m(interconnect_from(dgx_a100(2)));
  EXPECT_EQ(m.collective_seconds(ir::ALL_REDUCE, 1 << 20, one_node(1)), 0.0);
  EXPECT_EQ(m.collective_seconds(ir::ALL_GATHER, 0, one_node(8)), 0.0);
  EXPECT_EQ(m.p2p_seconds(0, true), 0.0);
}

TEST(CollectiveModel, PointToPointInNodeUsesNvlink) {
  CollectiveModel m(interconnect_from(hgx_hopper(2)));
  const int64_t bytes = 64 << 20;
  // latency 0.6 µs + S / (450 GB/s × 0.82)
  EXPECT_NEAR(m.p2p_seconds(bytes, true), 0.6e-6 + bytes / (450e9 * 0.82), 1e-12);
  EXPECT_NEAR(m.p2p_seconds(bytes, false), 2.7e-6 + bytes / (50e9 * 0.95), 1e-12);
}

TEST(CollectiveModel, RejectsImpossibleGroupsAndMissingNics) {
  CollectiveModel m(interconnect_from(dgx_a100(2)));
  EXPECT_THROW(m.collective_seconds(ir::ALL_REDUCE, 1024, GroupShape{8, 2, 3}), Error);  // 2 × 3 < 8
  EXPECT_THROW(m.collective_seconds(ir::ALL_REDUCE, 1024, GroupShape{8, 9, 1}), Error);  // more nodes than ranks
  // One node: every rank is on it, whatever max_ranks_per_node says.
  EXPECT_EQ(m.collective_seconds(ir::ALL_REDUCE, 1024, GroupShape{8, 1, 1}),
            m.collective_seconds(ir::ALL_REDUCE, 1024, one_node(8)));
  EXPECT_THROW(m.collective_seconds(ir::ALL_REDUCE, -1, one_node(8)), Error);

  auto single = dgx_a100(1);
  single.clear_nic();
  single.clear_nics_per_node();
  CollectiveModel no_nic(interconnect_from(single));
  EXPECT_GT(no_nic.collective_seconds(ir::ALL_REDUCE, 1024, one_node(8)), 0.0);
  EXPECT_THROW(no_nic.collective_seconds(ir::ALL_REDUCE, 1024, nodes_of(2, 8)), Error);
  EXPECT_THROW(no_nic.p2p_seconds(1024, false), Error);
}

TEST(Interconnect, NamesTheMissingField) {
  auto c = dgx_a100(2);
  c.mutable_nvlink()->clear_efficiency();
  try {
    interconnect_from(c);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.where().field, "cluster.nvlink.efficiency");
  }
  auto d = dgx_a100(2);
  d.mutable_nic()->set_efficiency(1.5);
  EXPECT_THROW(interconnect_from(d), Error);
  auto e = dgx_a100(2);
  e.clear_nic();
  EXPECT_THROW(interconnect_from(e), Error);  // multi-node needs a NIC
}

}  // namespace
}  // namespace lacuna::cost
