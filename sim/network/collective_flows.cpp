#include "sim/network/collective_flows.h"

#include <algorithm>
#include <string>

#include "sim/core/error.h"
#include "sim/network/nccl_trees.h"

namespace lacuna::network {
namespace {

using cost::nccl::Algorithm;
using cost::nccl::Protocol;


const char* algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::kRing: return "ring";
    case Algorithm::kTree: return "tree";
    case Algorithm::kNvls: return "NVLS";
    case Algorithm::kDirect: return "direct";
  }
  return "?";
}

// The algorithm an override names, or false for AUTO.
bool override_algorithm(scenario::NcclAlgorithm a, Algorithm& out) {
  switch (a) {
    case scenario::NCCL_ALGO_RING: out = Algorithm::kRing; return true;
    case scenario::NCCL_ALGO_TREE: out = Algorithm::kTree; return true;
    case scenario::NCCL_ALGO_NVLS: out = Algorithm::kNvls; return true;
    default: return false;
  }
}

bool override_protocol(scenario::NcclProtocol p, Protocol& out) {
  switch (p) {
    case scenario::NCCL_PROTO_LL: out = Protocol::kLL; return true;
    case scenario::NCCL_PROTO_LL128: out = Protocol::kLL128; return true;
    case scenario::NCCL_PROTO_SIMPLE: out = Protocol::kSimple; return true;
    default: return false;
  }
}

// Whether NCCL implements `a` for this kind at all (in lacuna's candidate set):
// all-reduce has ring, tree and NVLS; the other ring collectives only ring;
// all-to-all is grouped send/recv.
bool kind_has(ir::CollectiveKind kind, Algorithm a) {
  if (kind == ir::ALL_TO_ALL) return false;
  if (kind == ir::ALL_REDUCE) return true;
  return a == Algorithm::kRing;
}

// Bytes each ring hop carries per byte of S.
double ring_hop_bytes(ir::CollectiveKind kind, int32_t n) {
  const double nd = static_cast<double>(n);
  switch (kind) {
    case ir::ALL_REDUCE: return 2.0 * (nd - 1.0) / nd;
    case ir::ALL_GATHER:
    case ir::REDUCE_SCATTER: return (nd - 1.0) / nd;
    default: return 1.0;  // broadcast, reduce: a pipelined chain moves S over every link
  }
}

}  // namespace

CollectiveFlows::CollectiveFlows(const ir::Program& program, const Topology& topology,
                                 const scenario::NetworkSpec& network)
    : program_(program),
      topology_(topology),
      links_(cost::interconnect_from(program.cluster())),
      model_(links_),
      algorithm_override_(network.algorithm()),
      protocol_override_(network.protocol()),
      groups_(static_cast<size_t>(program.groups_size())),
      builder_(topology.num_links()) {
  for (int i = 0; i < program.ranks_size(); ++i) {
    const ir::RankBinding& r = program.ranks(i);
    if (r.node() < 0 || r.node() >= topology.num_nodes()) {
      throw Error(field("ranks[" + std::to_string(i) + "].node"),
                  "node " + std::to_string(r.node()) + " outside the cluster's " + std::to_string(topology.num_nodes()) +
                      " nodes (cluster.num_nodes)");
    }
    if (r.local_gpu() < 0 || r.local_gpu() >= topology.gpus_per_node()) {
      throw Error(field("ranks[" + std::to_string(i) + "].local_gpu"),
                  "GPU " + std::to_string(r.local_gpu()) + " outside the node's " +
                      std::to_string(topology.gpus_per_node()) + " GPUs (cluster.gpus_per_node)");
    }
  }
}

CollectiveFlows::Group& CollectiveFlows::group(int32_t index) {
  if (index < 0 || index >= static_cast<int32_t>(groups_.size())) {
    throw Error("communication group " + std::to_string(index) + " does not exist (the program has " +
                std::to_string(groups_.size()) + " groups)");
  }
  Group& g = groups_[index];
  if (g.ready) return g;
  for (int32_t rank : program_.groups(index).ranks()) {
    if (rank < 0 || rank >= program_.ranks_size()) {
      throw Error("groups[" + std::to_string(index) + "]: rank " + std::to_string(rank) + " out of range");
    }
    const ir::RankBinding& r = program_.ranks(rank);
    g.members.push_back(Member{r.node(), r.local_gpu()});
  }
  // NCCL orders a ring so that it enters and leaves every node once; with
  // NVLink domains larger than a node (NCCL's multi-node NVLink) the domain
  // plays the node's part: sorted by node, members of a domain are contiguous.
  std::sort(g.members.begin(), g.members.end(),
            [](const Member& a, const Member& b) { return a.node != b.node ? a.node < b.node : a.gpu < b.gpu; });
  int32_t most = 0;
  for (int32_t i = 0; i < static_cast<int32_t>(g.members.size()); ++i) {
    const int32_t d = topology_.domain_of(g.members[i].node);
    if (i == 0 || d != topology_.domain_of(g.members[i - 1].node)) {
      g.domain_begin.push_back(i);
      g.domain.push_back(d);
    }
  }
  g.domain_begin.push_back(static_cast<int32_t>(g.members.size()));
  const int32_t domains = static_cast<int32_t>(g.domain_begin.size()) - 1;
  for (int32_t j = 0; j < domains; ++j) most = std::max(most, g.domain_begin[j + 1] - g.domain_begin[j]);
  g.shape = cost::GroupShape{static_cast<int32_t>(g.members.size()), std::max(domains, 1), std::max(most, 1)};
  // The NICs a domain's crossings use: NCCL's channels go through the NICs
  // next to the domain's members, min(ranks per domain, NICs of the domain)
  // of them: first each member's own rail, then the other NICs of the
  // members' nodes, then those of the domain's other nodes (the analytic
  // model's min(ranks, nics_per_node × nodes per domain), cost::Interconnect).
  const int32_t nics = topology_.nics_per_node();
  const int32_t npd = topology_.nodes_per_domain();
  const int32_t usable = std::min(g.shape.max_ranks_per_node, nics * npd);
  g.rails.resize(static_cast<size_t>(domains));
  for (int32_t j = 0; j < domains && usable > 0; ++j) {
    std::vector<Nic>& rails = g.rails[j];
    auto add = [&](Nic nic) {
      if (static_cast<int32_t>(rails.size()) < usable && std::find(rails.begin(), rails.end(), nic) == rails.end())
        rails.push_back(nic);
    };
    const int32_t begin = g.domain_begin[j], end = g.domain_begin[j + 1];
    for (int32_t i = begin; i < end; ++i) add(Nic{g.members[i].node, topology_.rail_of(g.members[i].gpu)});
    for (int32_t i = begin; i < end; ++i) {
      for (int32_t r = 0; r < nics; ++r) add(Nic{g.members[i].node, r});
    }
    const int32_t first = topology_.first_node_of_domain(g.domain[j]);
    for (int32_t n = first; n < first + npd; ++n) {
      for (int32_t r = 0; r < nics; ++r) add(Nic{n, r});
    }
  }
  g.ready = true;
  return g;
}

const cost::GroupShape& CollectiveFlows::shape(int32_t index) { return group(index).shape; }

const cost::Candidates& CollectiveFlows::filtered(int32_t index, Group& g, ir::CollectiveKind kind) {
  const size_t k = static_cast<size_t>(kind) & 7u;
  if (g.filtered_ready[k]) return g.filtered[k];
  const cost::Candidates all = model_.candidates(kind, g.shape);
  cost::Candidates out;
  Algorithm algo{};
  const bool restrict_algo = override_algorithm(algorithm_override_, algo) && kind_has(kind, algo);
  for (const cost::Candidate& c : all) {
    if (!restrict_algo || c.algorithm == algo) out.items[out.count++] = c;
  }
  const std::string where = ir::CollectiveKind_Name(kind) + " on group " + std::to_string(index) + " (" +
                            std::to_string(g.shape.size) + " ranks on " + std::to_string(g.shape.nodes) +
                            (topology_.nodes_per_domain() > 1 ? " NVLink domains)" : " nodes)");
  if (out.count == 0) {
    throw Error(field("cluster.network.algorithm"),
                std::string("NCCL cannot run ") + algorithm_name(algo) + " for " + where +
                    (algo == Algorithm::kNvls ? ": NVLS needs cluster.nvls and every member in one NVLink domain" : ""),
                "use NCCL_ALGO_AUTO or an algorithm this group supports");
  }
  Protocol proto{};
  if (override_protocol(protocol_override_, proto)) {
    cost::Candidates kept;
    for (const cost::Candidate& c : out) {
      if (c.protocol == proto) kept.items[kept.count++] = c;
    }
    if (kept.count > 0) {
      out = kept;
    } else if (restrict_algo) {
      throw Error(field("cluster.network.protocol"),
                  std::string("NCCL's ") + algorithm_name(algo) + " has no such protocol for " + where +
                      " (NVLS runs Simple only)",
                  "use NCCL_PROTO_AUTO or NCCL_PROTO_SIMPLE");
    }
    // Otherwise (all-to-all, NVLS under AUTO): the algorithm has only Simple,
    // and NCCL runs it whatever NCCL_PROTO says for the others.
  }
  g.filtered[k] = out;
  g.filtered_ready[k] = true;
  return g.filtered[k];
}

cost::Candidate CollectiveFlows::choose(int32_t index, ir::CollectiveKind kind, int64_t bytes) {
  Group& g = group(index);
  const cost::Candidates& c = filtered(index, g, kind);
  const cost::Candidate* pick = c.begin();
  for (const cost::Candidate& x : c) {
    if (x.seconds(bytes) < pick->seconds(bytes)) pick = &x;
  }
  return *pick;
}

int32_t CollectiveFlows::landing_node(const Group& g, const Nic& nic, int32_t to) const {
  const int32_t offset = nic.node - topology_.first_node_of_domain(topology_.domain_of(nic.node));
  return topology_.first_node_of_domain(g.domain[to]) + offset;
}

void CollectiveFlows::add_domain_hop(const Group& g, int32_t from, int32_t to, double coefficient) {
  const std::vector<Nic>& rails = g.rails[from];
  const double share = coefficient / static_cast<double>(rails.size());
  for (const Nic& nic : rails) {
    topology_.for_each_hop_link(nic.node, landing_node(g, nic, to), nic.rail,
                                [&](LinkId l) { builder_.add(l, share); });
  }
}

void CollectiveFlows::add_hop(const Group& g, int32_t from, int32_t to, double coefficient) {
  const Member& a = g.members[from];
  const Member& b = g.members[to];
  if (topology_.domain_of(a.node) == topology_.domain_of(b.node)) {
    // One NVLink domain: through the NVLink switch fabric, even across trays.
    builder_.add(topology_.nvlink_up(a.node, a.gpu), coefficient);
    builder_.add(topology_.nvlink_down(b.node, b.gpu), coefficient);
    return;
  }
  // A domain-crossing hop is spread by NCCL's channels over the domain's NICs.
  const auto domain_index = [&](int32_t member) {
    return static_cast<int32_t>(std::upper_bound(g.domain_begin.begin(), g.domain_begin.end(), member) -
                                g.domain_begin.begin()) - 1;
  };
  add_domain_hop(g, domain_index(from), domain_index(to), coefficient);
}

void CollectiveFlows::ring_pattern(const Group& g, ir::CollectiveKind kind) {
  const int32_t n = g.shape.size;
  const double per_hop = ring_hop_bytes(kind, n);
  // Broadcast and reduce pipeline a chain of n − 1 hops; the others close the ring.
  const bool chain = kind == ir::BROADCAST || kind == ir::REDUCE;
  const int32_t hops = chain ? n - 1 : n;
  for (int32_t i = 0; i < hops; ++i) add_hop(g, i, (i + 1) % n, per_hop);
}

void CollectiveFlows::tree_pattern(const Group& g) {
  // Inside an NVLink domain: a chain; every edge carries S towards the head
  // (reduce) and S back (broadcast), over both trees together.
  const int32_t domains = static_cast<int32_t>(g.domain_begin.size()) - 1;
  for (int32_t j = 0; j < domains; ++j) {
    for (int32_t i = g.domain_begin[j]; i + 1 < g.domain_begin[j + 1]; ++i) {
      add_hop(g, i + 1, i, 1.0);
      add_hop(g, i, i + 1, 1.0);
    }
  }
  // Across domains: NCCL's double binary tree, S/2 per tree, up and down.
  if (domains < 2) return;
  for (int32_t tree = 0; tree < 2; ++tree) {
    for (int32_t j = 0; j < domains; ++j) {
      const int32_t parent = dtree_parent(domains, tree, j);
      if (parent < 0) continue;
      add_domain_hop(g, j, parent, 0.5);
      add_domain_hop(g, parent, j, 0.5);
    }
  }
}

void CollectiveFlows::nvls_pattern(const Group& g) {
  // Each rank sends S and receives S/n for the in-switch reduction, then sends
  // S/n and receives S of the multicast: S(1 + 1/n) per direction.
  const double n = static_cast<double>(g.shape.size);
  for (const Member& m : g.members) {
    builder_.add(topology_.nvlink_up(m.node, m.gpu), (n + 1.0) / n);
    builder_.add(topology_.nvlink_down(m.node, m.gpu), (n + 1.0) / n);
  }
}

void CollectiveFlows::all_to_all_pattern(const Group& g) {
  // S/n from every rank to every other; bytes leaving the NVLink domain go
  // through the rank's own NIC (its domain's NICs dealt out in member order),
  // so NICs are not aggregated, and land on the same rail at the destination.
  const int32_t n = g.shape.size;
  const double share = 1.0 / static_cast<double>(n);
  const int32_t domains = static_cast<int32_t>(g.domain_begin.size()) - 1;
  for (int32_t j = 0; j < domains; ++j) {
    for (int32_t i = g.domain_begin[j]; i < g.domain_begin[j + 1]; ++i) {
      for (int32_t t = 0; t < domains; ++t) {
        const int32_t count = g.domain_begin[t + 1] - g.domain_begin[t];
        if (t == j) {
          for (int32_t q = g.domain_begin[t]; q < g.domain_begin[t + 1]; ++q) {
            if (q != i) add_hop(g, i, q, share);
          }
          continue;
        }
        const std::vector<Nic>& rails = g.rails[j];
        const Nic& nic = rails[static_cast<size_t>(i - g.domain_begin[j]) % rails.size()];
        const double bytes = share * static_cast<double>(count);
        topology_.for_each_hop_link(nic.node, landing_node(g, nic, t), nic.rail,
                                    [&](LinkId l) { builder_.add(l, bytes); });
      }
    }
  }
}

std::span<const Usage> CollectiveFlows::collective_usage(int32_t index, ir::CollectiveKind kind,
                                                         const cost::Candidate& chosen) {
  Group& g = group(index);
  for (const CachedUsage& c : g.cached) {
    if (c.kind == kind && c.algorithm == chosen.algorithm && c.protocol == chosen.protocol) return usages_[c.index];
  }
  switch (chosen.algorithm) {
    case Algorithm::kRing: ring_pattern(g, kind); break;
    case Algorithm::kTree: tree_pattern(g); break;
    case Algorithm::kNvls: nvls_pattern(g); break;
    case Algorithm::kDirect: all_to_all_pattern(g); break;
  }
  // κ: the protocol's and algorithm's efficiency, so that the busiest
  // endpoint link, alone, takes exactly NCCL's S / algBw.
  const double pattern = builder_.endpoint_seconds_per_byte(topology_);
  const double kappa = pattern > 0 ? (1.0 / chosen.alg_bytes_per_s) / pattern : 1.0;
  usages_.push_back(builder_.take(kappa));
  g.cached.push_back(CachedUsage{kind, chosen.algorithm, chosen.protocol, static_cast<uint32_t>(usages_.size() - 1)});
  return usages_.back();
}

CollectiveFlows::Transfer CollectiveFlows::transfer(int32_t src_rank, int32_t dst_rank) {
  const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(src_rank)) << 32) | static_cast<uint32_t>(dst_rank);
  uint32_t index = transfer_index_.find(key);
  if (index == FlatMap::kMissing) {
    if (src_rank < 0 || src_rank >= program_.ranks_size() || dst_rank < 0 || dst_rank >= program_.ranks_size()) {
      throw Error("transfer between ranks " + std::to_string(src_rank) + " and " + std::to_string(dst_rank) +
                  ": out of range (the program has " + std::to_string(program_.ranks_size()) + " ranks)");
    }
    const ir::RankBinding& a = program_.ranks(src_rank);
    const ir::RankBinding& b = program_.ranks(dst_rank);
    double latency = 0;
    if (topology_.domain_of(a.node()) == topology_.domain_of(b.node())) {
      builder_.add(topology_.nvlink_up(a.node(), a.local_gpu()), 1.0);
      builder_.add(topology_.nvlink_down(b.node(), b.local_gpu()), 1.0);
      latency = links_.nvlink_latency_s;
    } else {
      if (!links_.has_nic) {
        throw Error(field("cluster.nic"), "a transfer crosses nodes but the cluster has no NIC description",
                    "set cluster.nic and cluster.nics_per_node");
      }
      topology_.for_each_hop_link(a.node(), b.node(), topology_.rail_of(a.local_gpu()),
                                  [&](LinkId l) { builder_.add(l, 1.0); });
      latency = links_.nic_latency_s + topology_.switch_latency_s(a.node(), b.node());
    }
    usages_.push_back(builder_.take(1.0));
    index = static_cast<uint32_t>(usages_.size() - 1);
    if (transfer_latency_.size() < usages_.size()) transfer_latency_.resize(usages_.size(), 0.0);
    transfer_latency_[index] = latency;
    transfer_index_.put(key, index);
  }
  return Transfer{usages_[index], transfer_latency_[index]};
}

}  // namespace lacuna::network
