#include "runtime/enqueue_order.h"

#include <sstream>
#include <string>

#include "sim/core/error.h"

namespace lacuna::runtime {

EnqueueOrder enqueue_order(const std::vector<const StreamPlan*>& streams, int num_events) {
  if (num_events < 0) throw Error("enqueue order: num_events < 0");
  EnqueueOrder out;
  out.records_per_event.assign(static_cast<std::size_t>(num_events), 0);
  std::vector<std::int64_t>& counter = out.records_per_event;  // counts as we go; final = records per event
  std::vector<std::size_t> pos(streams.size(), 0);
  std::size_t total = 0;
  for (const StreamPlan* s : streams) total += s->ops.size();
  out.steps.reserve(total);

  auto check_event = [&](const StreamPlan& sp, std::size_t i, const PlannedOp& p) {
    if (p.event < 0 || p.event >= num_events) {
      throw Error("enqueue order: " + stream_label(sp.rank, sp.stream, sp.name) + " op " + std::to_string(i) +
                  " uses event " + std::to_string(p.event) + " but the rank has " + std::to_string(num_events) +
                  " events");
    }
  };

  while (out.steps.size() < total) {
    bool progress = false;
    for (std::size_t s = 0; s < streams.size(); ++s) {
      const StreamPlan& sp = *streams[s];
      if (pos[s] >= sp.ops.size()) continue;
      const PlannedOp& p = sp.ops[pos[s]];
      EnqueueStep step{static_cast<int>(s), static_cast<int>(pos[s]), 0};
      if (p.kind == OpKind::kWait) {
        check_event(sp, pos[s], p);
        if (counter[static_cast<std::size_t>(p.event)] < p.value) continue;  // its record is not placed yet
        step.instance = p.value > 0 ? p.value : 0;
      } else if (p.kind == OpKind::kRecord) {
        check_event(sp, pos[s], p);
        step.instance = ++counter[static_cast<std::size_t>(p.event)];
      }
      out.steps.push_back(step);
      ++pos[s];
      progress = true;
    }
    if (progress) continue;

    // Nothing can move: every unfinished stream waits for a record that no
    // stream will reach.
    std::ostringstream report;
    int rank = streams.empty() ? 0 : streams.front()->rank;
    report << "deadlock on rank " << rank << ": no stream can progress (every unfinished stream waits for an "
           << "event that is never recorded often enough)";
    for (std::size_t s = 0; s < streams.size(); ++s) {
      const StreamPlan& sp = *streams[s];
      report << "\n  " << stream_label(sp.rank, sp.stream, sp.name) << ": ";
      if (pos[s] >= sp.ops.size()) {
        report << "done";
        continue;
      }
      const PlannedOp& p = sp.ops[pos[s]];
      report << "blocked at op " << pos[s] << " (" << p.what << "), counter at "
             << counter[static_cast<std::size_t>(p.event)];
    }
    throw Error(report.str());
  }
  return out;
}

}  // namespace lacuna::runtime
