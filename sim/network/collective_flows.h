// What a collective or a transfer puts on the links. The (algorithm,
// protocol) is NCCL's tuner's choice (cost::CollectiveModel::candidates, least
// predicted time), restricted by cluster.network.algorithm / protocol. The
// collective becomes ONE fluid activity of work = nccl-tests size S whose
// usage vector covers every link its algorithm's steps use, with per-link
// coefficients = the bytes that link carries per byte of S (the traffic
// pattern) × κ, where κ is chosen so that on an uncontended network the
// busiest NVLink/NIC link takes exactly the analytic model's S / algBw; for a
// ring κ = 1 / (protocol fraction). Formulas per algorithm in
// docs/network.md.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "sim/cost/collective_model.h"
#include "sim/network/flat_map.h"
#include "sim/network/fluid.h"
#include "sim/network/topology.h"
#include "sim/network/usage_builder.h"
#include "sim/proto/program.pb.h"

namespace lacuna::network {

class CollectiveFlows {
 public:
  // Checks every rank's node and local GPU against the topology (lacuna::Error
  // naming ranks[i].node / ranks[i].local_gpu). All references must outlive it.
  CollectiveFlows(const ir::Program& program, const Topology& topology, const scenario::NetworkSpec& network);
  // Holds `topology` by reference: a temporary would dangle.
  CollectiveFlows(const ir::Program& program, Topology&& topology, const scenario::NetworkSpec& network) = delete;

  const cost::GroupShape& shape(int32_t group);
  // NCCL's pick for this collective, after the overrides. Throws lacuna::Error
  // naming cluster.network.algorithm / protocol when the override cannot run
  // it (e.g. NVLS across nodes). Group of ≥ 2 ranks.
  cost::Candidate choose(int32_t group, ir::CollectiveKind kind, int64_t bytes);
  // The usage vector of one collective run as `chosen` (cached per group,
  // kind, algorithm and protocol; the span stays valid for the model's life).
  std::span<const Usage> collective_usage(int32_t group, ir::CollectiveKind kind, const cost::Candidate& chosen);

  struct Transfer {
    std::span<const Usage> usage;  // coefficient 1 on every link of the hop
    double latency_s = 0;          // NVLink latency, or NIC + switch tiers
  };
  Transfer transfer(int32_t src_rank, int32_t dst_rank);  // cached per pair

  const cost::CollectiveModel& nccl_model() const { return model_; }

 private:
  struct Member {
    int32_t node = 0;
    int32_t gpu = 0;
  };
  // One NIC: the node (tray) it sits in and its index there (its rail).
  struct Nic {
    int32_t node = 0;
    int32_t rail = 0;
    bool operator==(const Nic&) const = default;
  };
  struct CachedUsage {
    ir::CollectiveKind kind;
    cost::nccl::Algorithm algorithm;
    cost::nccl::Protocol protocol;
    uint32_t index;  // into usages_
  };
  struct Group {
    bool ready = false;
    std::vector<Member> members;  // by (node, local gpu): NCCL's ring order
    // Members of the group's j-th NVLink domain: [domain_begin[j],
    // domain_begin[j+1]). With one domain per node (HGX) a domain is a node.
    std::vector<int32_t> domain_begin;
    std::vector<int32_t> domain;            // per j: the cluster's domain index
    std::vector<std::vector<Nic>> rails;    // per j: the NICs its crossings use
    cost::GroupShape shape;
    std::array<bool, 8> filtered_ready{};
    std::array<cost::Candidates, 8> filtered{};
    std::vector<CachedUsage> cached;
  };

  Group& group(int32_t index);
  const cost::Candidates& filtered(int32_t index, Group& g, ir::CollectiveKind kind);
  // Traffic per byte of S of each algorithm, into builder_.
  void add_hop(const Group& g, int32_t from, int32_t to, double coefficient);
  // A crossing from the group's domain `from` to its domain `to`, spread over
  // `from`'s NICs; each lands on the same rail of the tray at the same
  // position in the destination domain.
  void add_domain_hop(const Group& g, int32_t from, int32_t to, double coefficient);
  int32_t landing_node(const Group& g, const Nic& nic, int32_t to) const;
  void ring_pattern(const Group& g, ir::CollectiveKind kind);
  void tree_pattern(const Group& g);
  void nvls_pattern(const Group& g);
  void all_to_all_pattern(const Group& g);

  const ir::Program& program_;
  const Topology& topology_;
  cost::Interconnect links_;
  cost::CollectiveModel model_;
  scenario::NcclAlgorithm algorithm_override_;
  scenario::NcclProtocol protocol_override_;
  std::vector<Group> groups_;
  std::vector<std::vector<Usage>> usages_;  // inner buffers never move
  FlatMap transfer_index_;                 // (src << 32 | dst) → usages_ index
  std::vector<double> transfer_latency_;  // by usages_ index
  UsageBuilder builder_;
};

}  // namespace lacuna::network
