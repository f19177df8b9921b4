// The executed op graph of a simulated iteration (docs/critical-path.md): a
// DAG whose nodes are the ops of the simulated ranks, the host issuing an op,
// and the barrier where a collective instance or a transfer started; an edge
// u → v says v could not start before u ended. Built by OpGraphRecorder from
// the engine's observer callbacks; slack.h computes latest times on it.
//
// Every node starts exactly when the last of its predecessors ended (0 when
// it has none): the graph reproduces the simulated times, so its longest path
// is the iteration time. Each node also names its binding predecessor (the
// one that ended at its start, by fixed tie rules), and following them back
// from the op that ended last gives the critical path.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "sim/core/units.h"

namespace lacuna::report {

inline constexpr uint32_t kNoNode = 0xffffffffu;

enum class NodeKind : uint8_t {
  kCompute,     // a Compute op: [start, end] it ran
  kCollective,  // one member's collective op: [start, end] the instance ran
  kTransfer,    // a send or a recv: [start, end] the transfer ran
  kHost,        // the host issuing op `op` (Op.host_ns, docs/engine.md#host): [from, issued]
  kEvent,       // an EventRecord or EventWait: zero length, at the time it completed
  kBarrier,     // a collective instance or transfer starting: zero length, at its start
};

// True for the nodes a critical path reports as steps (they take time or
// could): compute, communication and host issue.
inline bool is_step(NodeKind k) { return k != NodeKind::kEvent && k != NodeKind::kBarrier; }

struct GraphNode {
  TimeNs start;  // when its last predecessor ended
  TimeNs end;
  int32_t rank = -1;    // global rank; a barrier: the member whose arrival started it
  int32_t stream = -1;  // index into the rank's class streams
  int32_t op = -1;      // index into the stream's ops (kHost: the op it issues)
  NodeKind kind = NodeKind::kCompute;
  uint32_t pred = kNoNode;  // binding predecessor (its end == start); kNoNode: start == 0
  TimeNs duration() const { return end - start; }
};

// The whole graph (OpGraphRecorder with keep_graph).
struct OpGraph {
  std::vector<GraphNode> nodes;
  std::vector<std::pair<uint32_t, uint32_t>> edges;  // (from, to), each once
};

// One step of a critical path: a node that takes time, in time order.
struct PathStep {
  NodeKind kind = NodeKind::kCompute;
  int32_t rank = -1;
  int32_t stream = -1;
  int32_t op = -1;
  TimeNs start;
  TimeNs end;
  TimeNs duration() const { return end - start; }
};

// The chain of ops that set the iteration time: its steps cover [0, length]
// back to back (each starts when the previous one ended), so length is the
// iteration time.
struct CriticalPath {
  TimeNs length;
  std::vector<PathStep> steps;
};

}  // namespace lacuna::report
