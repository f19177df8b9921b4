// Earliest and latest times on the executed op graph (op_graph.h), with the
// Boost Graph Library: the longest path from a virtual source to every node
// (its earliest start, which must be the simulated start), and from every
// node to a virtual sink (its tail). With T the iteration time as the
// deadline, a node's latest start is T − tail and its slack
// latest start − start: how much later it could have started, everything
// else as simulated, without the iteration ending later. Slack is ≥ 0, and 0
// on every critical path (docs/critical-path.md#slack).
#pragma once

#include <cstdint>
#include <vector>

#include "sim/core/units.h"
#include "sim/report/analyses/op_graph.h"

namespace lacuna::report {

struct GraphTiming {
  TimeNs longest;                // the longest path: the iteration time
  std::vector<TimeNs> slack;     // per node
  // Nodes whose earliest start in the graph is not their simulated start
  // (0 unless the graph misses a dependency the engine had).
  uint64_t mismatched_starts = 0;
};

// Throws lacuna::Error if the graph has a cycle (a recorder bug).
GraphTiming time_graph(const OpGraph& graph);

}  // namespace lacuna::report
