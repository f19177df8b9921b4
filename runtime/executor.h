// The CPU executor: runs the per-rank programs of the IR (sim/proto/program.proto)
// for real, with the semantics of docs/engine.md, and records every op's
// ready / start / end on the steady clock (runtime/README.md).
//
// - Every stream of every executed rank is a thread; a stream runs its ops
//   strictly in order, the streams of a rank concurrently.
// - EventRecord increments the rank's event counter when its stream reaches it;
//   EventWait blocks until the counter is at least `value` (or fails after
//   `timeout` with a report). Counters start at 0 every iteration.
// - Compute: `fixed_duration_ns > 0` waits exactly that long; otherwise the op's
//   CPU kernel case (kernels/cpu_case.h) runs once, after taking one of the
//   `compute_slots` if they are limited. Either is multiplied by the rank's
//   compute_time_scale (> 1 only: a kernel cannot be made faster).
// - Collectives and Send/Recv go through the in-process Communicator
//   (runtime/communicator.h) with bytes / 4 floats (nccl-tests' S, see
//   program.proto). Fixed-duration ones synchronise through the communicator
//   (1 float) and then wait their fixed time.
// - Any failure on any thread aborts the communicator, wakes every waiter, joins
//   every thread and throws one lacuna::Error with the first failure and a
//   report of what every stream was doing. Never a hang, never std::terminate.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "runtime/replay.h"
#include "sim/proto/program.pb.h"

namespace lacuna::runtime {

struct ExecuteOptions {
  // Iterations to run; every iteration starts with all streams of all executed
  // ranks at a common barrier and event counters at 0.
  int iterations = 1;
  // Keep the spans of every iteration (ExecutedSpan::iteration tells them
  // apart); false keeps only the last iteration's.
  bool keep_all_iterations = false;
  // How long a communicator call or an event wait may block before the run
  // fails with a deadlock report.
  std::chrono::milliseconds timeout{10'000};
  // Global ranks to execute; empty = all. The set must be closed under the
  // groups and peers its ops use (a collective needs every member), else
  // lacuna::Error before anything runs.
  std::vector<int> ranks{};
  // Seed of the kernel cases' random inputs.
  std::uint64_t seed = 1;
  // Apply RankBinding.compute_time_scale (> 1 stretches compute ops).
  bool apply_compute_time_scale = true;
  // At most this many compute kernels run at once (0: no limit). Set it to
  // the number of cores when the ranks' streams outnumber them: a kernel then
  // starts when it gets a core, so its span is kernel time and the wait shows
  // as idle time before it (docs/executor.md#cpu-contention).
  int compute_slots = 0;
  // Replay mode (runtime/replay.h): when set, `ranks` need not be closed under
  // groups and peers; ops with a rank outside them are emulated from these
  // predicted spans. Not owned; must outlive the call.
  const ReplayTimes* replay = nullptr;
  // Refuse, before any buffer is allocated, a run whose estimated host memory
  // (runtime/memory_bound.h: the CPU backend's buffers and spans, the CUDA
  // backend's spans) exceeds this many bytes; 0: no limit. The CUDA backend
  // bounds each rank's device memory by its GPU's free memory
  // (runtime/gpu_memory.h).
  std::int64_t max_memory_bytes = 0;
};

// One op of one iteration; times in ns relative to the iteration's start
// (the moment the start barrier released every stream, steady clock).
// ready = the stream reached the op; start = the work began; end = it ended.
// Compute: start = when it got a compute slot (= ready without a limit).
// Record, wait: start = ready (a wait's end is when it was satisfied).
// Collectives and transfers: start = when the last member arrived / both
// sides were posted (the communicator's CallStats::started); fixed-duration
// ones end at start + the fixed duration. Replay-emulated ones: start =
// max(ready, predicted start).
struct ExecutedSpan {
  std::int32_t iteration = 0;
  std::int32_t rank = 0;
  std::int32_t stream = 0;
  std::int32_t op = 0;
  std::int64_t ready_ns = 0;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
};

struct ExecutionResult {
  // Sorted by (iteration, rank, stream, op).
  std::vector<ExecutedSpan> spans;
  // Wall time of each iteration: start barrier to the last stream's end.
  std::vector<std::int64_t> iteration_ns;
  // The last op end of the last iteration (relative to its start).
  std::int64_t end_ns = 0;
  // Executed global ranks, ascending.
  std::vector<int> ranks{};
  // Bytes copied between ranks by the communicator, all iterations.
  std::int64_t bytes_moved = 0;
  // Replay: ops per iteration emulated from the prediction (0 otherwise).
  int emulated_ops = 0;
};

// Runs `program` on the CPU. Throws lacuna::Error for an invalid program or
// option (before any thread starts) and for any failure while running
// (deadlock, mismatch, kernel error), with a report.
ExecutionResult execute(const ir::Program& program, const ExecuteOptions& options = {});

}  // namespace lacuna::runtime
