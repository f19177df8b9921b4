#include "sim/report/observers/op_graph_recorder.h"

#include <algorithm>
#include <string>

#include "sim/core/error.h"
#include "sim/ir/bound_program.h"

namespace lacuna::report {

namespace {

uint64_t record_key(uint32_t counter, uint64_t ordinal) { return (uint64_t{counter} << 32) | ordinal; }

[[noreturn]] void inconsistent(const engine::OpSpan& span, const std::string& what) {
  throw InternalError("internal: op graph of rank " + std::to_string(span.rank) + " stream " + std::to_string(span.stream) +
              " op " + std::to_string(span.op) + ": " + what);
}

}  // namespace

void OpGraphRecorder::on_run_begin(const engine::RunInfo& info) {
  const ir::Program& p = *info.program;
  // Pruning frees nodes as soon as nothing can reach them; a compute slot can
  // pass to a waiter long after its holder ended, so with slots nothing is
  // freed (slots only run on every rank of small CPU programs).
  ops_ = 0;
  for (int32_t r : info.simulated_ranks) {
    for (const ir::Stream& st : ir::BoundProgram(p).rank_class(r).streams()) ops_ += static_cast<uint64_t>(st.ops_size());
  }
  keep_graph_ = ops_ <= max_ops_;
  slots_ = info.compute_slots > 0;
  prune_ = !keep_graph_ && !slots_;
  graph_ = OpGraph{};
  refs_.clear();
  free_.clear();
  created_ = live_ = peak_live_ = 0;
  sim_index_.assign(static_cast<size_t>(p.ranks_size()), -1);
  stream_base_.clear();
  event_base_.clear();
  uint32_t streams = 0, events = 0;
  for (size_t i = 0; i < info.simulated_ranks.size(); ++i) {
    const int32_t r = info.simulated_ranks[i];
    sim_index_[static_cast<size_t>(r)] = static_cast<int32_t>(i);
    const ir::RankClass& cls = ir::BoundProgram(p).rank_class(r);
    stream_base_.push_back(streams);
    event_base_.push_back(events);
    streams += static_cast<uint32_t>(cls.streams_size());
    events += static_cast<uint32_t>(std::max(cls.num_events(), 0));
  }
  streams_.assign(streams, StreamState{});
  record_count_.assign(keep_graph_ ? events : 0, 0);
  records_.clear();
  arrivals_.clear();
  slot_holders_.clear();
  best_end_ = TimeNs::zero();
  best_ = kNoNode;
  path_ = CriticalPath{};
}

OpGraphRecorder::StreamState& OpGraphRecorder::stream(int32_t rank, int32_t s) {
  const int32_t i = sim_index_[static_cast<size_t>(rank)];
  return streams_[stream_base_[static_cast<size_t>(i)] + static_cast<uint32_t>(s)];
}

void OpGraphRecorder::ref(uint32_t node) {
  if (prune_ && node != kNoNode) ++refs_[node];
}

void OpGraphRecorder::unref(uint32_t node) {
  if (!prune_) return;
  // Iterative: freeing a node releases its binding predecessor, and so on
  // down a chain that only it kept.
  while (node != kNoNode && --refs_[node] == 0) {
    const uint32_t pred = graph_.nodes[node].pred;
    free_.push_back(node);
    --live_;
    node = pred;
  }
}

void OpGraphRecorder::hold(uint32_t& holder, uint32_t node) {
  if (holder == node) return;
  ref(node);
  const uint32_t old = holder;
  holder = node;
  unref(old);
}

void OpGraphRecorder::set_pred(uint32_t node, uint32_t pred) {
  GraphNode& n = graph_.nodes[node];
  if (n.pred == pred) return;
  ref(pred);
  const uint32_t old = n.pred;
  n.pred = pred;
  unref(old);
}

uint32_t OpGraphRecorder::add_node(NodeKind kind, const engine::OpSpan& span, TimeNs start, TimeNs end,
                                   uint32_t pred) {
  GraphNode n;
  n.start = start;
  n.end = end;
  n.rank = span.rank;
  n.stream = span.stream;
  n.op = span.op;
  n.kind = kind;
  n.pred = pred;
  uint32_t id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
    graph_.nodes[id] = n;
    refs_[id] = 0;
  } else {
    if (graph_.nodes.size() >= kNoNode) throw InternalError("internal: op graph exceeds 2^32 nodes");
    id = static_cast<uint32_t>(graph_.nodes.size());
    graph_.nodes.push_back(n);
    if (prune_) refs_.push_back(0);
  }
  ref(pred);
  ++created_;
  peak_live_ = std::max(peak_live_, ++live_);
  return id;
}

void OpGraphRecorder::edge(uint32_t from, uint32_t to) {
  if (keep_graph_ && from != kNoNode) graph_.edges.emplace_back(from, to);
}

void OpGraphRecorder::note_end(TimeNs end, uint32_t node) {
  // The first op reported with the latest end starts the path backwards.
  if (end > best_end_ || (best_ == kNoNode && end == best_end_)) {
    best_end_ = end;
    hold(best_, node);
  }
}

OpGraphRecorder::Issue OpGraphRecorder::issue(const engine::OpSpan& span) {
  StreamState& st = stream(span.rank, span.stream);
  const ir::Op& op = *span.ir;
  Issue is;
  is.prev = st.last;
  const bool late = span.issued > span.ready;
  if (op.host_ns() > 0 || op.host_sync()) {
    // The host clock of docs/engine.md#host, replayed: the engine reports
    // only issued = max(ready, clock). The host waited for the stream when it
    // synchronised and the stream was the later (also on a tie).
    const bool after_stream = op.host_sync() && span.ready >= st.host_clock;
    const TimeNs from = after_stream ? span.ready : st.host_clock;
    const TimeNs issued = from + TimeNs(op.host_ns());
    if (keep_graph_) {
      is.host = add_node(NodeKind::kHost, span, from, issued, after_stream ? st.last : st.last_host);
      edge(st.last_host, is.host);
      if (op.host_sync()) edge(st.last, is.host);
      hold(st.last_host, is.host);
    } else {
      if (after_stream) {
        st.run_start = from;
        hold(st.run_pred, st.last);
      }
      if (late) is.host = add_node(NodeKind::kHost, span, st.run_start, issued, st.run_pred);
    }
    st.host_clock = issued;
  }
  if (late) {
    if (is.host == kNoNode || graph_.nodes[is.host].end != span.issued) {
      inconsistent(span, "issued later than reached, but not when its host clock says");
    }
    is.bind = is.host;
  } else {
    is.bind = is.prev;
  }
  return is;
}

uint32_t OpGraphRecorder::slot_releaser(TimeNs start) const {
  // The compute op whose end freed the slot ended exactly at `start`; several
  // may have: the last reported one.
  auto it = std::upper_bound(slot_holders_.begin(), slot_holders_.end(), start,
                             [](TimeNs t, const std::pair<TimeNs, uint32_t>& h) { return t < h.first; });
  if (it == slot_holders_.begin() || std::prev(it)->first != start) return kNoNode;
  return std::prev(it)->second;
}

void OpGraphRecorder::on_op_end(const engine::OpSpan& span) {
  if (sim_index_[static_cast<size_t>(span.rank)] < 0) return;
  const ir::Op& op = *span.ir;
  if (op.has_wait()) return;  // on_wait_end, which knows what released it
  const Issue is = issue(span);
  StreamState& st = stream(span.rank, span.stream);
  switch (op.kind_case()) {
    case ir::Op::kCompute: {
      uint32_t pred = is.bind;
      uint32_t releaser = kNoNode;
      if (span.start > span.issued) {
        releaser = slots_ ? slot_releaser(span.start) : kNoNode;
        if (releaser == kNoNode) inconsistent(span, "a compute op started after it was issued, but no compute slot was released then");
        pred = releaser;
      }
      const uint32_t node = add_node(NodeKind::kCompute, span, span.start, span.end, pred);
      edge(is.prev, node);
      edge(is.host, node);
      edge(releaser, node);
      hold(st.last, node);
      if (slots_ && op.compute().fixed_duration_ns() <= 0) {
        ref(node);  // kept: a later waiter may get its slot (no pruning with slots anyway)
        slot_holders_.emplace_back(span.end, node);
      }
      break;
    }
    case ir::Op::kCollective:
    case ir::Op::kSend:
    case ir::Op::kRecv: {
      // Bound by its own issue until on_collective / on_transfer says which
      // member's arrival started it.
      const NodeKind kind = op.has_collective() ? NodeKind::kCollective : NodeKind::kTransfer;
      const uint32_t node = add_node(kind, span, span.start, span.end, is.bind);
      if (keep_graph_) arrivals_.emplace(node, is);
      hold(st.last, node);
      break;
    }
    case ir::Op::kRecord: {
      if (keep_graph_) {
        const uint32_t node = add_node(NodeKind::kEvent, span, span.end, span.end, is.bind);
        edge(is.prev, node);
        edge(is.host, node);
        const uint32_t counter = event_base_[static_cast<size_t>(sim_index_[static_cast<size_t>(span.rank)])] +
                                 static_cast<uint32_t>(op.record().event());
        records_.emplace(record_key(counter, ++record_count_[counter]), node);
        hold(st.last, node);
      } else {
        hold(st.last, is.bind);  // zero length: the stream's time is what issued it
      }
      break;
    }
    default:
      break;
  }
  note_end(span.end, st.last);
}

void OpGraphRecorder::on_wait_end(const engine::OpSpan& span, const engine::WaitCause& cause) {
  const int32_t idx = sim_index_[static_cast<size_t>(span.rank)];
  if (idx < 0) return;
  const Issue is = issue(span);
  // A wait that blocked ended with the record that released it, which was the
  // recording stream's latest op when it woke this one.
  const uint32_t record = cause.valid ? stream(span.rank, cause.stream).last : kNoNode;
  const uint32_t bind = cause.valid ? record : is.bind;
  StreamState& st = stream(span.rank, span.stream);
  if (keep_graph_) {
    const uint32_t node = add_node(NodeKind::kEvent, span, span.end, span.end, bind);
    edge(is.prev, node);
    edge(is.host, node);
    const int64_t value = span.ir->wait().value();
    if (value > 0) {
      const uint32_t counter = event_base_[static_cast<size_t>(idx)] + static_cast<uint32_t>(span.ir->wait().event());
      const auto it = records_.find(record_key(counter, static_cast<uint64_t>(value)));
      if (it == records_.end()) inconsistent(span, "its wait was satisfied, but its record was not seen");
      if (cause.valid && it->second != record) inconsistent(span, "released by another record than the one it needed");
      edge(it->second, node);
    }
    hold(st.last, node);
  } else {
    hold(st.last, bind);
  }
  note_end(span.end, st.last);
}

void OpGraphRecorder::barrier(const engine::OpSpan* const* members, size_t n, size_t binding) {
  // The members' nodes are their streams' latest: on_op_end just made them.
  std::vector<uint32_t>& ids = member_nodes_;
  ids.resize(n);
  for (size_t i = 0; i < n; ++i) ids[i] = stream(members[i]->rank, members[i]->stream).last;
  const uint32_t bind = graph_.nodes[ids[binding]].pred;
  if (!keep_graph_) {
    for (size_t i = 0; i < n; ++i) set_pred(ids[i], bind);
    return;
  }
  const engine::OpSpan& by = *members[binding];
  const uint32_t b = add_node(NodeKind::kBarrier, by, by.start, by.start, bind);
  for (size_t i = 0; i < n; ++i) {
    const auto it = arrivals_.find(ids[i]);
    if (it == arrivals_.end()) inconsistent(*members[i], "a communication op reported twice");
    edge(it->second.prev, b);
    edge(it->second.host, b);
    arrivals_.erase(it);
    edge(b, ids[i]);
    set_pred(ids[i], b);
  }
}

void OpGraphRecorder::on_transfer(const engine::OpSpan& send, const engine::OpSpan& recv) {
  if (sim_index_[static_cast<size_t>(send.rank)] < 0 || sim_index_[static_cast<size_t>(recv.rank)] < 0) return;
  const engine::OpSpan* sides[2] = {&send, &recv};
  barrier(sides, 2, recv.issued > send.issued ? 1 : 0);
}

void OpGraphRecorder::on_collective(const engine::CollectiveSpan& c) {
  std::vector<const engine::OpSpan*>& members = member_spans_;
  members.clear();
  for (const engine::OpSpan& m : c.members) members.push_back(&m);
  if (!members.empty()) barrier(members.data(), members.size(), members.size() - 1);
}

void OpGraphRecorder::on_run_end(TimeNs end) {
  path_ = CriticalPath{};
  path_.length = end;
  for (uint32_t n = best_; n != kNoNode; n = graph_.nodes[n].pred) {
    const GraphNode& g = graph_.nodes[n];
    if (!is_step(g.kind)) continue;
    path_.steps.push_back({g.kind, g.rank, g.stream, g.op, g.start, g.end});
  }
  std::reverse(path_.steps.begin(), path_.steps.end());
  // A host issuing back to back is one step (the pruned graph keeps such a
  // run as one node).
  size_t kept = 0;
  for (size_t i = 0; i < path_.steps.size(); ++i) {
    const PathStep& s = path_.steps[i];
    if (kept > 0) {
      PathStep& p = path_.steps[kept - 1];
      if (p.kind == NodeKind::kHost && s.kind == NodeKind::kHost && p.rank == s.rank && p.stream == s.stream) {
        p.end = s.end;
        p.op = s.op;
        continue;
      }
    }
    path_.steps[kept++] = s;
  }
  path_.steps.resize(kept);
  // Back to back from 0 to the end, by construction; checked, since every
  // figure of the report rests on it.
  TimeNs t = TimeNs::zero();
  for (const PathStep& s : path_.steps) {
    if (s.start != t) {
      throw InternalError("internal: critical path has a gap at " + std::to_string(t.count()) + " ns (rank " +
                  std::to_string(s.rank) + " stream " + std::to_string(s.stream) + " op " + std::to_string(s.op) +
                  " starts at " + std::to_string(s.start.count()) + " ns)");
    }
    t = s.end;
  }
  if (t != end) {
    throw InternalError("internal: critical path ends at " + std::to_string(t.count()) + " ns, the iteration at " +
                std::to_string(end.count()) + " ns");
  }
}

}  // namespace lacuna::report
