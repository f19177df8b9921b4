#include "sim/scenario/nvlink_domain.h"

#include <algorithm>

namespace lacuna::scenario {

int64_t nvlink_domain_gpus(const Cluster& cluster) {
  if (cluster.has_nvlink_domain_gpus() && cluster.nvlink_domain_gpus() > 0) return cluster.nvlink_domain_gpus();
  return std::max<int64_t>(cluster.gpus_per_node(), 1);
}

int64_t nodes_per_nvlink_domain(const Cluster& cluster) {
  const int64_t gpn = std::max<int64_t>(cluster.gpus_per_node(), 1);
  return std::max<int64_t>(nvlink_domain_gpus(cluster) / gpn, 1);
}

int64_t nvlink_domain_of_node(const Cluster& cluster, int64_t node) {
  return node / nodes_per_nvlink_domain(cluster);
}

}  // namespace lacuna::scenario
