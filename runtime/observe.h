// Feeds one measured iteration to the engine's observers (sim/engine/
// observer.h) as the simulator would feed a simulated one, so that the trace
// writer, the SVG, the bubble and communication accounting and the JSON
// timeline describe a measurement exactly as they describe a prediction
// (docs/executor.md#outputs).
//
// What is reconstructed, and how:
// - on_op_end for every op of the iteration in (end, rank, stream, op) order;
// - on_wait_end for every EventWait with its cause: the record that satisfied
//   it is the value-th record of its event on that rank in measured order
//   (records end under the event lock, runtime/executor.cpp), and the cause
//   is the op before that record on its stream; a wait whose record had ended
//   before the wait was reached has no cause (valid = false), as in the engine;
// - on_transfer for every send/recv pair, matched per (src, dst, channel) in
//   the order the ops were reached (the communicator's matching rule); ops
//   emulated by a replay have no partner and get none;
// - on_run_end at the last op end.
#pragma once

#include <vector>

#include "runtime/executor.h"
#include "sim/engine/observer.h"
#include "sim/proto/program.pb.h"

namespace lacuna::runtime {

// Iteration `iteration` of `result` (which must hold it: keep_all_iterations,
// or the last one). Throws lacuna::Error if the result has no spans for it.
void feed_observers(const ir::Program& program, const ExecutionResult& result, int iteration,
                    const std::vector<engine::Observer*>& observers);

}  // namespace lacuna::runtime
