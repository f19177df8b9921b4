// How a communication group sits on the nodes (cost::GroupShape: members,
// nodes, the most members on one node), computed in one place for the
// simulator, the placements' planners and the compiler, which each had
// their own copy.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/cost/cost_model.h"
#include "sim/proto/program.pb.h"

namespace lacuna::cost {

// The shape of a group whose members sit on `member_nodes` (one node id per
// member, any order).
GroupShape shape_of_nodes(std::vector<int64_t> member_nodes);

// The shape of the group of `ranks` of `program` (RankBinding.node of each).
GroupShape shape_of_ranks(const ir::Program& program, std::span<const int32_t> ranks);

}  // namespace lacuna::cost
