#include "sim/network/topology.h"

#include <algorithm>

#include "sim/core/error.h"
#include "sim/cost/collective_model.h"
#include "sim/scenario/nvlink_domain.h"

namespace lacuna::network {
namespace {


int32_t require_count(bool present, int64_t value, const char* path) {
  if (!present) throw Error(field(path), "not set");
  if (value < 1 || value > (int64_t{1} << 24)) {
    throw Error(field(path), "must be in [1, 16777216], got " + std::to_string(value));
  }
  return static_cast<int32_t>(value);
}

}  // namespace

Topology::Topology(const scenario::Cluster& cluster, const scenario::NetworkSpec& network) {
  const cost::Interconnect ic = cost::interconnect_from(cluster);
  num_nodes_ = require_count(cluster.has_num_nodes(), cluster.num_nodes(), "cluster.num_nodes");
  gpus_per_node_ = require_count(cluster.has_gpus_per_node(), cluster.gpus_per_node(), "cluster.gpus_per_node");
  nics_per_node_ = ic.has_nic ? static_cast<int32_t>(ic.nics_per_node) : 0;
  // Validated by the scenario (a whole number of nodes per domain, whole
  // domains per cluster); a hand-built cluster that breaks it is refused here.
  const int64_t domain_gpus = scenario::nvlink_domain_gpus(cluster);
  if (domain_gpus % gpus_per_node_ != 0 || num_nodes_ % scenario::nodes_per_nvlink_domain(cluster) != 0) {
    throw Error(field("cluster.nvlink_domain_gpus"),
                std::to_string(domain_gpus) + " GPUs is not a whole number of nodes of " +
                    std::to_string(gpus_per_node_) + " GPUs dividing the cluster's " + std::to_string(num_nodes_) +
                    " nodes",
                "use a multiple of gpus_per_node that divides num_nodes × gpus_per_node");
  }
  nodes_per_domain_ = static_cast<int32_t>(scenario::nodes_per_nvlink_domain(cluster));
  if (num_nodes_ > 1) {
    switch (cluster.topology()) {
      case scenario::RAIL_OPTIMIZED: rail_optimized_ = true; break;
      case scenario::FAT_TREE:
      case scenario::CLOS_3TIER: rail_optimized_ = false; break;
      default:
        throw Error(field("cluster.topology"), "not set", "RAIL_OPTIMIZED, FAT_TREE or CLOS_3TIER on a multi-node cluster");
    }
  }

  // Per GPU: NVLink up and down.
  const std::string nvl = "nvlink ";
  for (int32_t n = 0; n < num_nodes_; ++n) {
    for (int32_t g = 0; g < gpus_per_node_; ++g) {
      const std::string where = "node " + std::to_string(n) + " gpu " + std::to_string(g) + " ";
      LinkInfo at;
      at.gpu = g;
      at.first_node = at.last_node = n;
      add_link(LinkKind::kNvlinkUp, where + nvl + "up", ic.nvlink_bytes_per_s, n, -1, true, at);
      add_link(LinkKind::kNvlinkDown, where + nvl + "down", ic.nvlink_bytes_per_s, n, -1, true, at);
    }
  }
  // Per node: NICs.
  nic_base_ = static_cast<LinkId>(links_.size());
  for (int32_t n = 0; n < num_nodes_; ++n) {
    for (int32_t i = 0; i < nics_per_node_; ++i) {
      const std::string where = "node " + std::to_string(n) + " nic " + std::to_string(i) + " ";
      LinkInfo at;
      at.rail = i;
      at.first_node = at.last_node = n;
      add_link(LinkKind::kNicUp, where + "up", ic.nic_bytes_per_s, n, -1, true, at);
      add_link(LinkKind::kNicDown, where + "down", ic.nic_bytes_per_s, n, -1, true, at);
    }
  }
  if (nics_per_node_ == 0) return;

  // Switch tiers: groups per tier, then one trunk per direction per group (and
  // rail at a rail-optimized first tier) for every tier below the top.
  const int32_t top = network.tiers_size() - 1;
  int64_t below = num_nodes_;  // units of the tier below: nodes, then groups
  int64_t nodes_per_group = 1;  // nodes under one group of the current tier
  for (int32_t k = 0; k <= top; ++k) {
    const scenario::SwitchTier& spec = network.tiers(k);
    Tier t;
    t.name = spec.name();
    t.children = k < top ? spec.children() : below;
    t.oversubscription = spec.oversubscription();
    t.latency_s = spec.latency_us() * 1e-6;
    t.groups = static_cast<int32_t>((below + t.children - 1) / t.children);
    t.rails = (k == 0 && rail_optimized_) ? nics_per_node_ : 1;
    nodes_per_group *= t.children;
    t.nodes_per_group = nodes_per_group;
    tiers_.push_back(t);
    below = t.groups;
  }
  // Downward capacity per (group, rail) of the tier below, starting with the
  // NICs under each first-tier switch.
  std::vector<double> child_capacity;  // [group * rails + rail] of tier k - 1
  for (int32_t k = 0; k < top; ++k) {
    Tier& t = tiers_[k];
    t.trunk_base = static_cast<LinkId>(links_.size());
    std::vector<double> capacity(static_cast<size_t>(t.groups) * t.rails, 0.0);
    for (int32_t g = 0; g < t.groups; ++g) {
      const int64_t first = g * t.children;
      const int64_t last = std::min<int64_t>(first + t.children, k == 0 ? num_nodes_ : tiers_[k - 1].groups);
      for (int32_t r = 0; r < t.rails; ++r) {
        double down = 0;
        if (k == 0) {
          const double per_node = rail_optimized_ ? ic.nic_bytes_per_s : ic.nic_bytes_per_s * nics_per_node_;
          down = per_node * static_cast<double>(last - first);
        } else {
          const int32_t child_rails = tiers_[k - 1].rails;
          for (int64_t c = first; c < last; ++c) {
            for (int32_t cr = 0; cr < child_rails; ++cr) down += child_capacity[c * child_rails + cr];
          }
        }
        const double cap = down / t.oversubscription;
        capacity[static_cast<size_t>(g) * t.rails + r] = cap;
        std::string name = t.name;
        if (t.rails > 1) name += " rail " + std::to_string(r);
        name += " group " + std::to_string(g);
        // A 1:1 trunk carries nothing its children's links do not also carry.
        const bool binding = t.oversubscription > 1.0;
        LinkInfo at;
        at.rail = t.rails > 1 ? r : -1;
        at.first_node = static_cast<int32_t>(std::min<int64_t>(g * t.nodes_per_group, num_nodes_ - 1));
        at.last_node = static_cast<int32_t>(std::min<int64_t>((g + 1) * t.nodes_per_group, num_nodes_) - 1);
        add_link(LinkKind::kTrunkUp, name + " up", cap, -1, k, binding, at);
        add_link(LinkKind::kTrunkDown, name + " down", cap, -1, k, binding, at);
      }
    }
    child_capacity = std::move(capacity);
  }
}

void Topology::add_link(LinkKind kind, std::string name, double capacity, int32_t node, int32_t tier, bool binding,
                        const LinkInfo& where) {
  LinkInfo info = where;
  info.kind = kind;
  info.name = std::move(name);
  info.capacity_bytes_per_s = capacity;
  info.node = node;
  info.tier = tier;
  links_.push_back(std::move(info));
  binding_.push_back(binding ? 1 : 0);
}

int32_t Topology::group_of(int32_t node, int32_t tier) const {
  int64_t g = node;
  for (int32_t k = 0; k <= tier; ++k) {
    if (k == num_tiers() - 1) return 0;
    g /= tiers_[k].children;
  }
  return static_cast<int32_t>(g);
}

int32_t Topology::common_tier(int32_t a, int32_t b) const {
  for (int32_t k = 0; k < num_tiers() - 1; ++k) {
    if (group_of(a, k) == group_of(b, k)) return k;
  }
  return num_tiers() - 1;
}

double Topology::switch_latency_s(int32_t src_node, int32_t dst_node) const {
  if (src_node == dst_node || tiers_.empty()) return 0.0;
  const int32_t m = common_tier(src_node, dst_node);
  double s = tiers_[m].latency_s;
  for (int32_t k = 0; k < m; ++k) s += 2.0 * tiers_[k].latency_s;
  return s;
}

}  // namespace lacuna::network
