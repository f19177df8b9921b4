#include "sim/cost/group_shape.h"

#include <algorithm>

#include "sim/scenario/nvlink_domain.h"

namespace lacuna::cost {

GroupShape shape_of_nodes(std::vector<int64_t> member_nodes) {
  std::sort(member_nodes.begin(), member_nodes.end());
  GroupShape shape;
  shape.size = static_cast<int32_t>(member_nodes.size());
  shape.nodes = 0;
  shape.max_ranks_per_node = 0;
  for (size_t i = 0; i < member_nodes.size();) {
    size_t j = i;
    while (j < member_nodes.size() && member_nodes[j] == member_nodes[i]) ++j;
    ++shape.nodes;
    shape.max_ranks_per_node = std::max(shape.max_ranks_per_node, static_cast<int32_t>(j - i));
    i = j;
  }
  return shape;
}

GroupShape shape_of_ranks(const ir::Program& program, std::span<const int32_t> ranks) {
  // Domains, not nodes: GPUs of one NVLink domain talk over NVLink even on
  // different trays (docs/network.md#nvlink-domains).
  const int64_t per_domain = scenario::nodes_per_nvlink_domain(program.cluster());
  std::vector<int64_t> domains;
  domains.reserve(ranks.size());
  for (const int32_t r : ranks) domains.push_back(program.ranks(r).node() / per_domain);
  return shape_of_nodes(std::move(domains));
}

}  // namespace lacuna::cost
