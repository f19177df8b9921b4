// Builds the executed op graph (op_graph.h) and the critical path from the
// engine's observer callbacks, without changing what the engine does.
//
// Binding predecessor of each node (ties broken as listed, first wins):
// - an op that its host issued after the stream reached it (issued > ready):
//   its host node; otherwise the op before it on its stream;
// - a compute op that then waited for a compute slot (start > issued): the
//   compute op that released the slot (the last one reported ending then);
// - a wait that blocked (WaitCause.valid): the record that released it;
// - a collective member: the instance's barrier, bound by the member that
//   arrived last (the engine's arrival order), through what issued it;
// - a send or recv: the transfer's barrier, bound by the side issued later
//   (the send on a tie);
// - a host node: the op before on the stream when the host synchronised and
//   the stream was the later (on a tie), else the previous host node.
// The path starts at the first op reported with the latest end. Adjacent host
// steps of one stream are reported as one (the host issuing back to back).
//
// Two ways to keep it (docs/critical-path.md#size):
// - keep_graph: every node and every edge (the binding ones and the others:
//   stream order, host issue, the record each wait needs, every member's
//   arrival), so that slack.h can compute latest times. Memory grows with the
//   number of ops (about 100 bytes per op with the analysis).
// - otherwise only the binding chains: a node is kept while something can
//   still reach it backwards (a stream's latest op or host issue, a node whose
//   binding predecessor it is, the latest end), and freed, with whatever only
//   it kept, once nothing can; a host's run of back-to-back issues is one
//   node, made only when an op waits for it. No edges; the critical path is
//   the same.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "sim/engine/observer.h"
#include "sim/report/analyses/op_graph.h"

namespace lacuna::report {

class OpGraphRecorder : public engine::Observer {
 public:
  // Keeps the whole graph when the simulated ranks have at most
  // `whole_graph_max_ops` ops in all (0: never; kAlways: always), else only
  // the binding chains. Decided when the run begins (fold decides which
  // ranks are simulated).
  static constexpr uint64_t kAlways = ~uint64_t{0};
  explicit OpGraphRecorder(uint64_t whole_graph_max_ops) : max_ops_(whole_graph_max_ops) {}

  void on_run_begin(const engine::RunInfo& info) override;
  void on_op_end(const engine::OpSpan& span) override;
  void on_wait_end(const engine::OpSpan& span, const engine::WaitCause& cause) override;
  void on_transfer(const engine::OpSpan& send, const engine::OpSpan& recv) override;
  void on_collective(const engine::CollectiveSpan& collective) override;
  void on_run_end(TimeNs end) override;

  // After on_run_end.
  const CriticalPath& path() const { return path_; }
  // The whole graph; null when only the binding chains were kept.
  const OpGraph* graph() const { return keep_graph_ ? &graph_ : nullptr; }
  // Ops of the simulated ranks (records and waits included).
  uint64_t ops() const { return ops_; }
  // Nodes created, and the most alive at once (all of them with keep_graph).
  uint64_t nodes_created() const { return created_; }
  uint64_t peak_live_nodes() const { return peak_live_; }

 private:
  struct StreamState {
    uint32_t last = kNoNode;  // the node whose end is the stream's latest op end
    TimeNs host_clock;        // when the host issued the latest op (docs/engine.md#host)
    // keep_graph: the latest host node. Otherwise the host's current run of
    // back-to-back issues: since when, and what it started after (what a
    // host node made when an op waits for its host binds to).
    uint32_t last_host = kNoNode;
    uint32_t run_pred = kNoNode;
    TimeNs run_start;
  };
  // What issued an op: the stream's previous node and the op's host node.
  struct Issue {
    uint32_t prev = kNoNode;
    uint32_t host = kNoNode;
    uint32_t bind = kNoNode;  // the one that ended at `issued`
  };

  StreamState& stream(int32_t rank, int32_t stream);
  Issue issue(const engine::OpSpan& span);
  uint32_t add_node(NodeKind kind, const engine::OpSpan& span, TimeNs start, TimeNs end, uint32_t pred);
  void edge(uint32_t from, uint32_t to);
  void hold(uint32_t& holder, uint32_t node);  // holder = node, keeping node and letting the old one go
  void set_pred(uint32_t node, uint32_t pred);
  void ref(uint32_t node);
  void unref(uint32_t node);
  void note_end(TimeNs end, uint32_t node);
  void barrier(const engine::OpSpan* const* members, size_t n, size_t binding);
  uint32_t slot_releaser(TimeNs start) const;

  uint64_t max_ops_;
  uint64_t ops_ = 0;
  bool keep_graph_ = false;
  bool prune_ = false;
  OpGraph graph_;  // nodes (pooled when pruning) and, with keep_graph, edges
  std::vector<uint32_t> refs_;
  std::vector<uint32_t> free_;
  uint64_t created_ = 0;
  uint64_t live_ = 0;
  uint64_t peak_live_ = 0;

  std::vector<int32_t> sim_index_;     // global rank → simulated index, -1
  std::vector<uint32_t> stream_base_;  // simulated index → into streams_
  std::vector<uint32_t> event_base_;   // simulated index → into record_count_
  std::vector<StreamState> streams_;
  // keep_graph: records by (event counter, ordinal), so that a wait that did
  // not block still gets its edge from the record it needed; the arrival
  // predecessors of communication ops until their barrier exists.
  std::vector<uint32_t> record_count_;
  std::unordered_map<uint64_t, uint32_t> records_;
  std::unordered_map<uint32_t, Issue> arrivals_;
  // Compute slots: compute nodes that held a slot, in end order.
  bool slots_ = false;
  std::vector<std::pair<TimeNs, uint32_t>> slot_holders_;

  std::vector<uint32_t> member_nodes_;  // buffers of barrier() and on_collective()
  std::vector<const engine::OpSpan*> member_spans_;

  TimeNs best_end_;
  uint32_t best_ = kNoNode;
  CriticalPath path_;
};

}  // namespace lacuna::report
