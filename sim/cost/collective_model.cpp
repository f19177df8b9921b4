#include "sim/cost/collective_model.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <string>

#include "sim/core/error.h"
#include "sim/scenario/nvlink_domain.h"

namespace lacuna::cost {
namespace {

using nccl::Algorithm;
using nccl::Protocol;

constexpr std::array<Protocol, 3> kProtocols = {Protocol::kLL, Protocol::kLL128, Protocol::kSimple};


// A positive, finite value of an optional LinkSpec field, or an Error naming it.
double require_positive(bool present, double value, const std::string& path, const std::string& fix) {
  if (!present) throw Error(field(path), "not set", fix);
  if (!(value > 0) || !std::isfinite(value)) {
    throw Error(field(path), "must be a positive number, got " + std::to_string(value), fix);
  }
  return value;
}

double require_efficiency(bool present, double value, const std::string& path) {
  double e = require_positive(present, value, path, "the fraction of the link bandwidth NCCL achieves, in (0, 1]");
  if (e > 1.0) throw Error(field(path), "must be at most 1, got " + std::to_string(e));
  return e;
}

double require_latency(bool present, double value, const std::string& path) {
  if (!present) throw Error(field(path), "not set", "one-hop latency in microseconds");
  if (!(value >= 0) || !std::isfinite(value)) {
    throw Error(field(path), "must be a non-negative number, got " + std::to_string(value));
  }
  return value;
}

int idx(Protocol p) { return static_cast<int>(p); }

// NCCL's log2i: floor(log2(n)) for n ≥ 1.
int floor_log2(int64_t n) { return static_cast<int>(std::bit_width(static_cast<uint64_t>(n))) - 1; }

}  // namespace

Interconnect interconnect_from(const scenario::Cluster& cluster) {
  Interconnect out;
  const auto& nvl = cluster.nvlink();
  out.nvlink_bytes_per_s =
      require_positive(nvl.has_bandwidth_gb_per_s(), nvl.bandwidth_gb_per_s(), "cluster.nvlink.bandwidth_gb_per_s",
                       "per-GPU NVLink bandwidth per direction in GB/s, e.g. 450 for H100") *
      1e9 * require_efficiency(nvl.has_efficiency(), nvl.efficiency(), "cluster.nvlink.efficiency");
  out.nvlink_latency_s = require_latency(nvl.has_latency_us(), nvl.latency_us(), "cluster.nvlink.latency_us") * 1e-6;
  out.nvls = cluster.has_nvls() && cluster.nvls();

  const auto& nic = cluster.nic();
  const bool multi_node = cluster.has_num_nodes() && cluster.num_nodes() > 1;
  if (multi_node || nic.has_bandwidth_gb_per_s()) {
    out.nic_bytes_per_s =
        require_positive(nic.has_bandwidth_gb_per_s(), nic.bandwidth_gb_per_s(), "cluster.nic.bandwidth_gb_per_s",
                         "one NIC's bandwidth per direction in GB/s, e.g. 50 for 400 Gb/s NDR") *
        1e9 * require_efficiency(nic.has_efficiency(), nic.efficiency(), "cluster.nic.efficiency");
    out.nic_latency_s = require_latency(nic.has_latency_us(), nic.latency_us(), "cluster.nic.latency_us") * 1e-6;
    if (!cluster.has_nics_per_node() || cluster.nics_per_node() < 1) {
      throw Error(field("cluster.nics_per_node"), "must be at least 1 on a multi-node cluster");
    }
    out.nics_per_node = cluster.nics_per_node();
    out.nics_per_domain = out.nics_per_node * scenario::nodes_per_nvlink_domain(cluster);
    out.has_nic = true;
  }
  return out;
}

double bus_bandwidth_factor(ir::CollectiveKind kind, int64_t n) {
  const double nd = static_cast<double>(n);
  switch (kind) {
    case ir::ALL_REDUCE: return 2.0 * (nd - 1.0) / nd;
    case ir::ALL_GATHER:
    case ir::REDUCE_SCATTER:
    case ir::ALL_TO_ALL: return (nd - 1.0) / nd;
    case ir::BROADCAST:
    case ir::REDUCE: return 1.0;
    default: throw Error("unknown collective kind " + std::to_string(static_cast<int>(kind)));
  }
}

GroupShape CollectiveModel::normalized(const GroupShape& g) const {
  GroupShape out = g;
  // All members on one node: the per-node maximum is the group size, whatever
  // the caller left in the field (GroupShape{n} means n ranks in one node).
  if (out.nodes == 1) out.max_ranks_per_node = out.size;
  const bool ok = out.size >= 1 && out.nodes >= 1 && out.nodes <= out.size && out.max_ranks_per_node >= 1 &&
                  out.max_ranks_per_node <= out.size &&
                  static_cast<int64_t>(out.max_ranks_per_node) * out.nodes >= out.size;
  if (!ok) {
    throw Error("impossible communication group: " + std::to_string(g.size) + " ranks on " + std::to_string(g.nodes) +
                " nodes with at most " + std::to_string(g.max_ranks_per_node) + " per node");
  }
  if (out.nodes > 1 && !links_.has_nic) {
    throw Error(field("cluster.nic"), "a communication group spans " + std::to_string(out.nodes) +
                                          " nodes but the cluster has no NIC description",
                "set cluster.nic and cluster.nics_per_node");
  }
  return out;
}

double CollectiveModel::bus_bytes_per_s(const GroupShape& g) const {
  if (g.nodes <= 1) return links_.nvlink_bytes_per_s;
  // A ring crosses each NVLink-domain boundary (HGX: node boundary) once per
  // channel; NCCL spreads channels over the NICs the domain's members sit next
  // to (rail-optimized: one per GPU), so the crossing runs at the domain's
  // usable NIC aggregate, not one NIC.
  const int64_t usable_nics = std::min<int64_t>(g.max_ranks_per_node, nics_per_domain());
  return std::min(links_.nvlink_bytes_per_s, static_cast<double>(usable_nics) * links_.nic_bytes_per_s);
}

void CollectiveModel::add_ring(ir::CollectiveKind kind, const GroupShape& g, Candidates& out) const {
  const int64_t n = g.size;
  const int64_t nodes = g.nodes;
  int64_t steps = n - 1;
  int64_t inter_steps = nodes - 1;
  double bus_to_alg = 1.0;  // broadcast, reduce: a pipelined chain moves S once per link
  if (kind == ir::ALL_REDUCE) {
    steps = 2 * (n - 1);
    inter_steps = 2 * (nodes - 1);
    bus_to_alg = static_cast<double>(n) / static_cast<double>(steps);
  } else if (kind == ir::ALL_GATHER || kind == ir::REDUCE_SCATTER) {
    bus_to_alg = static_cast<double>(n) / static_cast<double>(steps);
  }
  const double bus = bus_bytes_per_s(g);
  const bool reduce_like = kind == ir::ALL_REDUCE || kind == ir::REDUCE;
  for (Protocol p : kProtocols) {
    double fraction = 1.0;
    if (p == Protocol::kLL) {
      fraction = (nodes > 1 || reduce_like) ? nccl::kRingLLFractionReduceOrMultiNode : nccl::kRingLLFractionOther;
    } else if (p == Protocol::kLL128) {
      fraction = g.max_ranks_per_node < 2 ? nccl::kRingLL128FractionOneRankPerNode : nccl::kRingLL128Fraction;
    }
    const double latency_us = nccl::kRingBaseLatencyUs[idx(p)] +
                              static_cast<double>(steps - inter_steps) * nccl::kRingNvlinkHopUs[idx(p)] +
                              static_cast<double>(inter_steps) * nccl::kRingNetHopUs[idx(p)];
    out.items[out.count++] = Candidate{Algorithm::kRing, p, latency_us * 1e-6, bus * fraction * bus_to_alg};
  }
}

void CollectiveModel::add_tree(const GroupShape& g, Candidates& out) const {
  const double bus = bus_bytes_per_s(g) * nccl::kTreeFraction;
  for (Protocol p : kProtocols) {
    double fraction = 1.0;
    if (p == Protocol::kLL) fraction = nccl::kTreeLLFraction;
    if (p == Protocol::kLL128) {
      fraction = g.nodes == 1 ? nccl::kTreeLL128FractionSingleNode : nccl::kTreeLL128FractionMultiNode;
    }
    // Up the intra-node chain and the inter-node tree, then back down.
    const double latency_us =
        nccl::kTreeBaseLatencyUs[idx(p)] +
        2.0 * (static_cast<double>(g.max_ranks_per_node - 1) * nccl::kTreeNvlinkHopUs[idx(p)] +
               static_cast<double>(floor_log2(g.nodes)) * nccl::kTreeNetHopUs[idx(p)]);
    out.items[out.count++] = Candidate{Algorithm::kTree, p, latency_us * 1e-6, bus * fraction * nccl::kTreeBusToAlg};
  }
}

void CollectiveModel::add_nvls(const GroupShape& g, Candidates& out) const {
  // Rank i reduces chunk i in the switch (sends S, receives S/n) and multicasts
  // it back (sends S/n, receives S): S·(1 + 1/n) per direction per rank.
  const double n = static_cast<double>(g.size);
  const double alg = links_.nvlink_bytes_per_s * nccl::kNvlsEfficiencyHopper * n / (n + 1.0);
  const double latency_us = nccl::kNvlsBaseLatencyUs + nccl::kNvlsNvlinkHopUs;
  out.items[out.count++] = Candidate{Algorithm::kNvls, Protocol::kSimple, latency_us * 1e-6, alg};
}

void CollectiveModel::add_all_to_all(const GroupShape& g, Candidates& out) const {
  // Grouped send/recv to every peer at once: each rank sends S/n to each peer.
  // Off-node bytes leave through the rank's share of its node's NICs, so
  // all-to-all does not aggregate NICs the way a ring does.
  const double n = static_cast<double>(g.size);
  const double k = static_cast<double>(g.max_ranks_per_node);
  double seconds_per_byte = 0;
  if (g.nodes == 1) {
    seconds_per_byte = (n - 1.0) / n / links_.nvlink_bytes_per_s;
  } else {
    const double usable_nics = static_cast<double>(std::min<int64_t>(g.max_ranks_per_node, nics_per_domain()));
    const double nic_share = usable_nics * links_.nic_bytes_per_s / k;
    seconds_per_byte = std::max((k - 1.0) / n / links_.nvlink_bytes_per_s, (n - k) / n / nic_share);
  }
  const int s = idx(Protocol::kSimple);
  const double hop_us = g.nodes == 1 ? nccl::kRingNvlinkHopUs[s] : nccl::kRingNetHopUs[s];
  const double latency_us = nccl::kRingBaseLatencyUs[s] + hop_us;
  out.items[out.count++] = Candidate{Algorithm::kDirect, Protocol::kSimple, latency_us * 1e-6, 1.0 / seconds_per_byte};
}

Candidates CollectiveModel::candidates(ir::CollectiveKind kind, const GroupShape& shape) const {
  const GroupShape group = normalized(shape);
  if (group.size < 2) throw Error("a collective over one rank has no candidates");
  Candidates out;
  switch (kind) {
    case ir::ALL_REDUCE:
      add_ring(kind, group, out);
      add_tree(group, out);
      if (links_.nvls && group.nodes == 1) add_nvls(group, out);
      break;
    case ir::ALL_GATHER:
    case ir::REDUCE_SCATTER:
    case ir::BROADCAST:
    case ir::REDUCE: add_ring(kind, group, out); break;
    case ir::ALL_TO_ALL: add_all_to_all(group, out); break;
    default: throw Error("unknown collective kind " + std::to_string(static_cast<int>(kind)));
  }
  return out;
}

Candidate CollectiveModel::best(ir::CollectiveKind kind, int64_t bytes, const GroupShape& group) const {
  const Candidates all = candidates(kind, group);
  const Candidate* pick = all.begin();
  for (const Candidate& c : all) {
    if (c.seconds(bytes) < pick->seconds(bytes)) pick = &c;
  }
  return *pick;
}

double CollectiveModel::collective_seconds(ir::CollectiveKind kind, int64_t bytes, const GroupShape& group) const {
  if (bytes < 0) throw Error("collective of negative size " + std::to_string(bytes) + " bytes");
  if (normalized(group).size == 1 || bytes == 0) return 0.0;
  return best(kind, bytes, group).seconds(bytes);
}

double CollectiveModel::p2p_seconds(int64_t bytes, bool same_node) const {
  if (bytes < 0) throw Error("transfer of negative size " + std::to_string(bytes) + " bytes");
  if (bytes == 0) return 0.0;
  if (same_node) return links_.nvlink_latency_s + static_cast<double>(bytes) / links_.nvlink_bytes_per_s;
  if (!links_.has_nic) {
    throw Error(field("cluster.nic"), "a transfer crosses nodes but the cluster has no NIC description",
                "set cluster.nic and cluster.nics_per_node");
  }
  return links_.nic_latency_s + static_cast<double>(bytes) / links_.nic_bytes_per_s;
}

}  // namespace lacuna::cost
