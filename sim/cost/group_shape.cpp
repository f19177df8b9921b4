#include "sim/cost/group_shape.h"

#include <algorithm>

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
  std::vector<int64_t> nodes;
  nodes.reserve(ranks.size());
  for (const int32_t r : ranks) nodes.push_back(program.ranks(r).node());
  return shape_of_nodes(std::move(nodes));
}

}  // namespace lacuna::cost
