// What the engine tells the outside world: every op's start and end. Traces,
// bubble accounting and memory tracking are observers; the engine knows no
// file format.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/core/units.h"
#include "sim/proto/forward.h"

namespace lacuna::engine {

// ready <= issued <= start <= end for every op.
struct OpSpan {
  int32_t rank = 0;
  int32_t stream = 0;  // index into the rank's class streams
  int32_t op = 0;      // index into that stream's ops
  const ir::Op* ir = nullptr;  // never null in a callback
  TimeNs ready;   // the stream reached the op (its previous op finished)
  // The host had issued it (Op.host_ns / host_sync, docs/engine.md#host):
  // = ready when the host was not late (always, for a measured run, whose
  // host cannot be observed). Nothing of the op happens before.
  TimeNs issued;
  TimeNs start;  // it began: collective when all members arrived, p2p when both
                 // sides posted, compute when it had a compute slot,
                 // wait/record = issued
  TimeNs end;
  // The iteration the op belongs to (0-based; SimulationOptions::iterations).
  uint32_t iteration = 0;
};

// For an EventWait: the op whose completion (followed by the EventRecord that
// satisfied the wait) released it, on the same rank.
struct WaitCause {
  bool valid = false;  // false when the event had already been recorded when reached
  int32_t stream = 0;
  int32_t op = 0;      // the op before the record; -1 if the record was first on its stream
  TimeNs ready;  // its stream reached it (before: the stream was busy with earlier ops)
  TimeNs start;  // it began (between ready and start it waited for peers)
  TimeNs end;
};

// One completed collective instance (instance `seq` of group `group`): its
// members' spans in the order they arrived, so the last one is the member
// whose arrival started it (start = its `issued`). All share start and end.
// In fold mode only the simulated members are listed.
struct CollectiveSpan {
  int32_t group = 0;  // index into Program.groups
  uint64_t seq = 0;   // its position among the group's collectives
  std::span<const OpSpan> members;
};

struct RunInfo {
  const ir::Program* program = nullptr;
  // Ranks simulated: all of them, or (fold) one representative per class of
  // identical ranks. represents[i] lists the ranks simulated_ranks[i] stands for
  // (itself included).
  std::vector<int32_t> simulated_ranks;
  std::vector<std::vector<int32_t>> represents;
  // SimulationOptions::compute_slots (0: none): a compute op that started
  // after it was issued waited for a slot another compute op released.
  int32_t compute_slots = 0;
  // Consecutive iterations the run simulates (SimulationOptions::iterations);
  // every OpSpan carries its own.
  int32_t iterations = 1;
};

class Observer {
 public:
  virtual ~Observer() = default;
  virtual void on_run_begin(const RunInfo& /*info*/) {}
  // Every op of every simulated rank, when it ends (records and waits included).
  virtual void on_op_end(const OpSpan& span) = 0;
  // Additionally for each EventWait, after its on_op_end.
  virtual void on_wait_end(const OpSpan& /*span*/, const WaitCause& /*cause*/) {}
  // Once per completed point-to-point transfer, after both on_op_end calls.
  virtual void on_transfer(const OpSpan& /*send*/, const OpSpan& /*recv*/) {}
  // Once per completed collective instance, after its members' on_op_end.
  virtual void on_collective(const CollectiveSpan& /*collective*/) {}
  // `end`: the last op end of the run (of its last iteration).
  virtual void on_run_end(TimeNs /*end*/) {}
};

}  // namespace lacuna::engine
