// The cluster's links, one direction each: per GPU an NVLink up and down to
// its NVLink domain's non-blocking switch fabric (the node's NVSwitch, or an
// NVL72 rack's NVLink Switch trays joining several nodes: every GPU pair of a
// domain talks over these two links, docs/network.md#nvlink-domains); per
// node `nics_per_node` NICs with an up and a down link to the first switch
// tier; per switch group of every tier but the top one, its uplinks pooled into one trunk per direction (perfect ECMP)
// with capacity = what its children can send into it / oversubscription.
// Rail-optimized clusters have one first-tier switch group per (group, rail);
// rails join above the first tier. docs/network.md describes it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/network/link_observer.h"
#include "sim/proto/scenario.pb.h"

namespace lacuna::network {

class Topology {
 public:
  // `network` must be resolved (network_presets.h). Throws lacuna::Error
  // naming the cluster field for a missing or invalid size or link figure.
  Topology(const scenario::Cluster& cluster, const scenario::NetworkSpec& network);

  const std::vector<LinkInfo>& links() const { return links_; }
  size_t num_links() const { return links_.size(); }
  double capacity(LinkId link) const { return links_[link].capacity_bytes_per_s; }
  // False for a trunk whose constraint is implied by the links below it (its
  // tier is 1:1): every byte on it also crosses one of its children's links
  // with the same coefficient, so it can never be the only bottleneck and the
  // max-min allocation is the same without it. Non-binding links still carry
  // (and report) load.
  bool binding(LinkId link) const { return binding_[link] != 0; }
  const std::vector<uint8_t>& binding_flags() const { return binding_; }

  int32_t num_nodes() const { return num_nodes_; }
  int32_t gpus_per_node() const { return gpus_per_node_; }
  int32_t nics_per_node() const { return nics_per_node_; }
  int32_t num_tiers() const { return static_cast<int32_t>(tiers_.size()); }
  // Nodes per NVLink domain (scenario::nodes_per_nvlink_domain) and the
  // domain of a node: GPUs of one domain reach each other over NVLink only.
  int32_t nodes_per_domain() const { return nodes_per_domain_; }
  int32_t domain_of(int32_t node) const { return node / nodes_per_domain_; }
  int32_t first_node_of_domain(int32_t domain) const { return domain * nodes_per_domain_; }
  bool rail_optimized() const { return rail_optimized_; }

  LinkId nvlink_up(int32_t node, int32_t gpu) const { return static_cast<LinkId>(2 * (node * gpus_per_node_ + gpu)); }
  LinkId nvlink_down(int32_t node, int32_t gpu) const { return nvlink_up(node, gpu) + 1; }
  LinkId nic_up(int32_t node, int32_t nic) const {
    return nic_base_ + static_cast<LinkId>(2 * (node * nics_per_node_ + nic));
  }
  LinkId nic_down(int32_t node, int32_t nic) const { return nic_up(node, nic) + 1; }
  // The NIC (= rail) next to a GPU: local_gpu · nics_per_node / gpus_per_node.
  int32_t rail_of(int32_t local_gpu) const { return local_gpu * nics_per_node_ / gpus_per_node_; }

  // The lowest tier whose switch group holds both nodes (a ≠ b).
  int32_t common_tier(int32_t a, int32_t b) const;
  // Switch latency of one cross-node hop: each tier below the common one is
  // crossed twice (up and down), the common tier once.
  double switch_latency_s(int32_t src_node, int32_t dst_node) const;

  // Calls f(link) for every link of a cross-node hop on `rail`: the source
  // NIC's up link, the trunks up to the common tier, the trunks down, the
  // destination NIC's down link on the same rail (NCCL PXN-like).
  template <class F>
  void for_each_hop_link(int32_t src_node, int32_t dst_node, int32_t rail, F&& f) const {
    f(nic_up(src_node, rail));
    const int32_t m = common_tier(src_node, dst_node);
    for (int32_t k = 0; k < m; ++k) f(trunk_up(k, group_of(src_node, k), rail));
    for (int32_t k = m - 1; k >= 0; --k) f(trunk_up(k, group_of(dst_node, k), rail) + 1);
    f(nic_down(dst_node, rail));
  }

 private:
  struct Tier {
    std::string name;
    int64_t children = 1;
    double oversubscription = 1;
    double latency_s = 0;
    int32_t groups = 1;   // switch groups of this tier
    int32_t rails = 1;    // trunks per group (rails at a rail-optimized first tier)
    int64_t nodes_per_group = 1;  // nodes under one group
    LinkId trunk_base = 0;
  };

  int32_t group_of(int32_t node, int32_t tier) const;
  LinkId trunk_up(int32_t tier, int32_t group, int32_t rail) const {
    const Tier& t = tiers_[tier];
    return t.trunk_base + static_cast<LinkId>(2 * (group * t.rails + (t.rails > 1 ? rail : 0)));
  }
  // `where` carries the placement fields of LinkInfo (gpu, rail, node range).
  void add_link(LinkKind kind, std::string name, double capacity, int32_t node, int32_t tier, bool binding,
                const LinkInfo& where);

  int32_t num_nodes_ = 1;
  int32_t gpus_per_node_ = 1;
  int32_t nodes_per_domain_ = 1;
  int32_t nics_per_node_ = 0;
  bool rail_optimized_ = false;
  LinkId nic_base_ = 0;
  std::vector<Tier> tiers_;
  std::vector<LinkInfo> links_;
  std::vector<uint8_t> binding_;
};

}  // namespace lacuna::network
