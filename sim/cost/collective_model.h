// NCCL-like collective and point-to-point timing: for each (algorithm,
// protocol) NCCL could run, time = latency + bytes / algorithm bandwidth, and
// the least wins, as in NCCL's tuner. Bandwidths come from the cluster's
// links (achievable fractions in LinkSpec.efficiency); the hierarchy rule and
// every constant are explained in docs/cost-model.md.
#pragma once

#include <array>
#include <cstdint>

#include "sim/cost/cost_model.h"
#include "sim/cost/nccl_tuning.h"
#include "sim/proto/program.pb.h"
#include "sim/proto/scenario.pb.h"

namespace lacuna::cost {

// The links of a cluster in SI units, validated.
struct Interconnect {
  double nvlink_bytes_per_s = 0;  // per direction × efficiency
  double nvlink_latency_s = 0;
  bool has_nic = false;
  double nic_bytes_per_s = 0;  // one NIC, per direction × efficiency
  double nic_latency_s = 0;
  int64_t nics_per_node = 0;
  // NICs of one NVLink domain: nics_per_node × nodes per domain
  // (docs/network.md#nvlink-domains). A group's "nodes" in GroupShape are its
  // NVLink domains, and a domain's crossings may use any of its NICs.
  int64_t nics_per_domain = 0;
  bool nvls = false;
};

// Throws lacuna::Error naming the missing or invalid cluster field. NIC fields
// are required only when the cluster has more than one node.
Interconnect interconnect_from(const scenario::Cluster& cluster);

// One way NCCL could run a collective.
struct Candidate {
  nccl::Algorithm algorithm = nccl::Algorithm::kRing;
  nccl::Protocol protocol = nccl::Protocol::kSimple;
  double latency_s = 0;
  double alg_bytes_per_s = 0;  // S / (t − latency) for nccl-tests' size S
  double seconds(int64_t bytes) const { return latency_s + static_cast<double>(bytes) / alg_bytes_per_s; }
};

// Up to 7 candidates (ring ×3, tree ×3, NVLS), without allocation.
struct Candidates {
  std::array<Candidate, 7> items{};
  int count = 0;
  const Candidate* begin() const { return items.data(); }
  const Candidate* end() const { return items.data() + count; }
};

class CollectiveModel {
 public:
  explicit CollectiveModel(const Interconnect& links) : links_(links) {}

  // Every candidate for this collective on this group (group.size ≥ 2). A
  // group with nodes == 1 is taken as all of its ranks on that node.
  // Throws lacuna::Error for an impossible group shape or a multi-node group on
  // a cluster without NICs.
  Candidates candidates(ir::CollectiveKind kind, const GroupShape& group) const;
  // The candidate NCCL's tuner would pick: least predicted time (ties → the
  // earlier candidate: ring before tree before NVLS, LL before LL128 before Simple).
  Candidate best(ir::CollectiveKind kind, int64_t bytes, const GroupShape& group) const;

  // Seconds; 0 for a group of one or zero bytes.
  double collective_seconds(ir::CollectiveKind kind, int64_t bytes, const GroupShape& group) const;
  double p2p_seconds(int64_t bytes, bool same_node) const;

  // Per-rank bottleneck ("bus") bandwidth of a ring or tree over `group`.
  double bus_bytes_per_s(const GroupShape& group) const;

 private:
  // Checks the shape (lacuna::Error when impossible) and, for a single-node
  // group, sets max_ranks_per_node to the group size.
  GroupShape normalized(const GroupShape& group) const;
  void add_ring(ir::CollectiveKind kind, const GroupShape& group, Candidates& out) const;
  void add_tree(const GroupShape& group, Candidates& out) const;
  void add_nvls(const GroupShape& group, Candidates& out) const;
  void add_all_to_all(const GroupShape& group, Candidates& out) const;

  // links_.nics_per_domain, or nics_per_node for an Interconnect built by
  // hand without it (one node per domain).
  int64_t nics_per_domain() const {
    return links_.nics_per_domain > 0 ? links_.nics_per_domain : links_.nics_per_node;
  }

  Interconnect links_;
};

// nccl-tests' busbw / algbw factor for a collective over n ranks.
double bus_bandwidth_factor(ir::CollectiveKind kind, int64_t n);

}  // namespace lacuna::cost
