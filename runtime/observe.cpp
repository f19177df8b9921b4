#include "runtime/observe.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include "sim/core/error.h"
#include "sim/ir/bound_program.h"

namespace lacuna::runtime {
namespace {

engine::OpSpan to_op_span(const ir::Program& program, const ExecutedSpan& s) {
  engine::OpSpan span;
  span.rank = s.rank;
  span.stream = s.stream;
  span.op = s.op;
  span.ir = &ir::BoundProgram(program).op(s.rank, s.stream, s.op);
  span.ready = TimeNs(s.ready_ns);
  // The executor ignores Op.host_ns / host_sync (the real host has its own
  // overhead) and cannot see when its host issued an op: as if on time.
  span.issued = span.ready;
  span.start = TimeNs(s.start_ns);
  span.end = TimeNs(s.end_ns);
  return span;
}

}  // namespace

void feed_observers(const ir::Program& program, const ExecutionResult& result, int iteration,
                    const std::vector<engine::Observer*>& observers) {
  std::vector<engine::OpSpan> spans;
  for (const ExecutedSpan& s : result.spans) {
    if (s.iteration == iteration) spans.push_back(to_op_span(program, s));
  }
  if (spans.empty()) throw Error("execute: no measured spans for iteration " + std::to_string(iteration));

  engine::RunInfo info;
  info.program = &program;
  info.simulated_ranks.assign(result.ranks.begin(), result.ranks.end());
  for (int r : result.ranks) info.represents.push_back({r});
  for (engine::Observer* o : observers) o->on_run_begin(info);

  std::sort(spans.begin(), spans.end(), [](const engine::OpSpan& a, const engine::OpSpan& b) {
    return std::tie(a.end, a.rank, a.stream, a.op) < std::tie(b.end, b.rank, b.stream, b.op);
  });
  // Lookup of a span by (rank, stream, op), for wait causes (after the sort:
  // the pointers are into `spans`).
  std::map<std::tuple<int, int, int>, const engine::OpSpan*> by_id;
  for (const engine::OpSpan& s : spans) by_id[{s.rank, s.stream, s.op}] = &s;
  // Records of each (rank, event) in the order they happened (spans are in
  // end order now).
  std::map<std::pair<int, int>, std::vector<const engine::OpSpan*>> records;
  for (const engine::OpSpan& s : spans) {
    if (s.ir->kind_case() == ir::Op::kRecord) records[{s.rank, s.ir->record().event()}].push_back(&s);
  }

  // Send / recv partners by the IR's matching rule, each side in the order
  // reached (its ready time; stream and op break ties within a rank).
  std::vector<const engine::OpSpan*> by_ready;
  for (const engine::OpSpan& s : spans) by_ready.push_back(&s);
  std::sort(by_ready.begin(), by_ready.end(), [](const engine::OpSpan* a, const engine::OpSpan* b) {
    return std::tie(a->ready, a->rank, a->stream, a->op) < std::tie(b->ready, b->rank, b->stream, b->op);
  });
  const ir::BoundProgram bound(program);
  ir::P2pMatching<const engine::OpSpan*> transfers;
  for (const engine::OpSpan* s : by_ready) {
    if (s->ir->kind_case() == ir::Op::kSend) transfers.add_send(bound.p2p_key(s->rank, *s->ir), s);
    if (s->ir->kind_case() == ir::Op::kRecv) transfers.add_recv(bound.p2p_key(s->rank, *s->ir), s);
  }

  TimeNs end;
  for (const engine::OpSpan& s : spans) {
    end = std::max(end, s.end);
    for (engine::Observer* o : observers) o->on_op_end(s);
    if (s.ir->kind_case() != ir::Op::kWait) continue;
    engine::WaitCause cause;
    const auto it = records.find({s.rank, s.ir->wait().event()});
    const int64_t value = s.ir->wait().value();
    if (it != records.end() && value >= 1 && value <= static_cast<int64_t>(it->second.size())) {
      const engine::OpSpan* record = it->second[static_cast<size_t>(value - 1)];
      if (record->end > s.ready) {
        cause.valid = true;
        cause.stream = record->stream;
        cause.op = record->op - 1;
        if (cause.op >= 0) {
          const auto before = by_id.find({record->rank, record->stream, cause.op});
          if (before != by_id.end()) {
            cause.ready = before->second->ready;
            cause.start = before->second->start;
            cause.end = before->second->end;
          }
        } else {
          cause.ready = cause.start = cause.end = record->end;
        }
      }
    }
    for (engine::Observer* o : observers) o->on_wait_end(s, cause);
  }

  std::vector<std::pair<const engine::OpSpan*, const engine::OpSpan*>> pairs;
  transfers.for_each_pair([&](const ir::P2pKey&, const engine::OpSpan* send, const engine::OpSpan* recv) {
    pairs.emplace_back(send, recv);
  });
  std::sort(pairs.begin(), pairs.end(), [](const auto& a, const auto& b) {
    const TimeNs ea = std::max(a.first->end, a.second->end), eb = std::max(b.first->end, b.second->end);
    return std::tie(ea, a.first->rank, a.first->stream, a.first->op) <
           std::tie(eb, b.first->rank, b.first->stream, b.first->op);
  });
  for (const auto& [send, recv] : pairs) {
    for (engine::Observer* o : observers) o->on_transfer(*send, *recv);
  }
  for (engine::Observer* o : observers) o->on_run_end(end);
}

}  // namespace lacuna::runtime
