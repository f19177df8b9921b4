// How a communication group sits on the NVLink domains (cost::GroupShape:
// members, domains, the most members in one domain), computed in one place
// for the simulator, the placements' planners and the compiler, which each
// had their own copy. GroupShape's "nodes" are NVLink domains
// (docs/network.md#nvlink-domains): a node on an HGX cluster, a whole rack of
// trays on an NVL72 one; the collective model's NVLink/NIC split follows them.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/cost/cost_model.h"
#include "sim/proto/program.pb.h"

namespace lacuna::cost {

// The shape of a group whose members sit on `member_nodes` (one NVLink domain
// id, or node id on one-node domains, per member, any order).
GroupShape shape_of_nodes(std::vector<int64_t> member_nodes);

// The shape of the group of `ranks` of `program`: the NVLink domain of each
// RankBinding.node (scenario::nodes_per_nvlink_domain of program.cluster()).
GroupShape shape_of_ranks(const ir::Program& program, std::span<const int32_t> ranks);

}  // namespace lacuna::cost
