// What a run will cost before it starts (docs/performance.md#estimate): its
// events, counted from the program as the engine will schedule them, and the
// bytes of the engine's per-run state, from the sizes of its own records.
// Computed in O(simulated ranks x group slots + ops of one rank per class),
// without flattening a class or asking the cost model anything.
#pragma once

#include <cstdint>

#include "sim/core/units.h"
#include "sim/engine/simulator.h"
#include "sim/proto/program.pb.h"

namespace lacuna::engine {

struct EngineEstimate {
  int64_t all_ranks = 0;
  int64_t simulated_ranks = 0;
  int64_t streams = 0;  // over the simulated ranks
  int64_t represented_ranks = 0;  // sum of the ranks each simulated rank stands for
  uint64_t ops = 0;     // every op of every simulated stream, over all iterations
  // Queue pops: one per compute op, per collective instance (shared by its
  // simulated members) and per transfer (send/recv pair); exact under fixed
  // or analytic communication. An op with host costs adds one more when its
  // host is late (docs/engine.md#host), which only the run knows:
  // `host_events` is the most it can add. A communication model's wakeups
  // come on top (the flow network's re-timed completions replace the events
  // they cancel).
  uint64_t events = 0;
  uint64_t host_events = 0;
  // The engine's state for one run (one Simulator): per simulated rank and
  // stream, per group, per mailbox, the flattened classes and the event
  // queue, at the sizes of the engine's records.
  Bytes state;
};

// Plans the simulated set as the Simulator would (options.fold) and counts.
// `options.iterations` multiplies the ops and events.
EngineEstimate estimate_engine(const ir::Program& program, const SimulationOptions& options);

}  // namespace lacuna::engine
