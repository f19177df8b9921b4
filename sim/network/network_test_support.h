// Test helpers: programs with just enough of ir::Program for the network
// model (cluster, ranks with node / local GPU, groups).
#pragma once

#include <vector>

#include "sim/cost/test_clusters.h"
#include "sim/proto/program.pb.h"

namespace lacuna::network::testing {

// `nodes` × cluster.gpus_per_node ranks, rank r on node r / gpn, GPU r % gpn.
inline ir::Program program_on(const scenario::Cluster& cluster) {
  ir::Program p;
  *p.mutable_cluster() = cluster;
  const int gpn = static_cast<int>(cluster.gpus_per_node());
  const int n = static_cast<int>(cluster.num_nodes()) * gpn;
  for (int r = 0; r < n; ++r) {
    ir::RankBinding* b = p.add_ranks();
    b->set_node(r / gpn);
    b->set_local_gpu(r % gpn);
  }
  return p;
}

// Adds a group of these ranks; returns its index.
inline int32_t add_group(ir::Program& p, const std::vector<int32_t>& ranks) {
  ir::Group* g = p.add_groups();
  for (int32_t r : ranks) g->add_ranks(r);
  return p.groups_size() - 1;
}

inline std::vector<int32_t> range(int32_t first, int32_t count, int32_t stride = 1) {
  std::vector<int32_t> out;
  for (int32_t i = 0; i < count; ++i) out.push_back(first + i * stride);
  return out;
}

// A two-tier fabric: first tier of `children` nodes with `oversubscription`,
// then a top tier; switch latency 0 unless given.
inline void two_tiers(scenario::Cluster& c, int64_t children, double oversubscription, double latency_us = 0) {
  auto* net = c.mutable_network();
  net->clear_tiers();
  auto* t0 = net->add_tiers();
  t0->set_name("leaf");
  t0->set_children(children);
  t0->set_oversubscription(oversubscription);
  t0->set_latency_us(latency_us);
  auto* t1 = net->add_tiers();
  t1->set_name("spine");
  t1->set_oversubscription(1);
  t1->set_latency_us(latency_us);
}

}  // namespace lacuna::network::testing
