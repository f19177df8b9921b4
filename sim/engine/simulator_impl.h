// Simulator::Impl: the flattened program and the per-rank runtime state.
// Internal to the engine (simulator.cpp runs it, blocked_ops.cpp explains a
// deadlock from it).
//
// Per simulated rank the runtime keeps only stream cursors, event counters and
// per-group issue counters; ops live once per class in FlatClass.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/engine/comm_cost_cache.h"
#include "sim/engine/event_queue.h"
#include "sim/engine/flat_program.h"
#include "sim/engine/fold.h"
#include "sim/engine/simulator.h"
#include "sim/ir/bound_program.h"

namespace lacuna::engine {

// What a queued event completes.
struct EngineEvent {
  // kCommSettle: the communication model's changes at this time are all in
  // (every event already queued for it has run), so its completions can be
  // taken: one re-solve per timestamp instead of one per change.
  enum Kind : uint32_t { kOpDone, kCollectiveDone, kTransferDone, kHostIssued, kCommWakeup, kCommSettle };
  Kind kind = kOpDone;
  uint32_t index = 0;  // stream (kOpDone, kHostIssued), collective instance, transfer
};

enum class StreamStatus : uint8_t {
  kIdle,         // about to be advanced
  kRunning,      // a compute op is in flight
  kBlockedWait,  // event counter below the wait's value
  kBlockedComm,  // collective or p2p not complete
  kBlockedSlot,  // a compute op waiting for one of SimulationOptions::compute_slots
  kBlockedHost,  // the op is reached but its host has not issued it yet (a kHostIssued is queued)
  kDone,
};

struct StreamState {
  uint32_t rank = 0;   // simulated-rank index
  int32_t local = 0;   // stream index within the class
  uint32_t begin = 0;  // class op range of this stream
  uint32_t cursor = 0;
  uint32_t end = 0;
  // The iteration the stream is in (0-based, < SimulationOptions::iterations):
  // at its end the stream wraps to `begin` with iteration + 1. Per-iteration
  // models (the variability model's Perturbation draws) key on it.
  uint32_t iteration = 0;
  uint32_t comm = 0;  // collective instance or mailbox while kBlockedComm
  int32_t prev_op = -1;  // the last finished op, for WaitCause
  StreamStatus status = StreamStatus::kIdle;
  TimeNs ready;
  TimeNs start;
  TimeNs prev_ready;
  TimeNs prev_start;
  TimeNs prev_end;
  // A compute op in flight under interference (compute_slowdown_under_comm
  // > 0): its completion event, the work left at full speed as of
  // `work_since`, and whether it currently runs slowed.
  EventId compute_done;
  double work_left_ns = 0;
  TimeNs work_since;
  bool slowed = false;
  bool holds_slot = false;  // its compute op holds a compute slot
};

struct SimRank {
  int32_t rank = 0;  // global
  int32_t cls = 0;
  bool scaled = false;
  double scale = 1.0;
  // NVLink domain of the rank's node (docs/network.md#nvlink-domains): a
  // transfer within one runs over NVLink, even between trays of an NVL72.
  int32_t node = 0;
  uint32_t stream_base = 0;    // into Impl::streams
  uint32_t event_base = 0;     // into Impl::event_counts
  uint32_t slot_base = 0;      // into Impl::slot_group / slot_counter
  uint32_t endpoint_base = 0;  // into Impl::endpoint_mailbox
  uint32_t num_streams = 0;
  int32_t comm_in_flight = 0;  // collectives and transfers under way (interference)
};

// One collective of a group: members matched by issue order.
struct CollectiveInstance {
  int32_t group = 0;
  uint64_t seq = 0;  // its position among the group's collectives
  ir::CollectiveKind kind = ir::COLLECTIVE_UNSPECIFIED;
  int64_t bytes = 0;
  int64_t fixed_ns = 0;
  uint32_t first = 0;  // stream of the first arrival (messages)
  int32_t arrived = 0;
  bool done = false;
  bool via_model = false;  // timed by the CommunicationModel
  TimeNs start;
  EventId completion;
  std::vector<uint32_t> waiters;  // streams; capacity kept across reuse
};

struct GroupInfo {
  int32_t expected = 0;  // simulated members
  int32_t shape_id = 0;
  // Simulated members and their issue-counter index (-1: the member binds no
  // slot to this group, so it can never arrive).
  std::vector<std::pair<uint32_t, int32_t>> members;
};

struct GroupRuntime {
  uint64_t head_seq = 0;
  std::vector<uint32_t> pending;  // instances head_seq, head_seq+1, ...
};

// FIFO of unmatched posts of one (src, dst, channel): only one side can have
// posts waiting, otherwise they would have matched.
struct Mailbox {
  ir::P2pKey key;  // the transfers this mailbox matches, in order
  bool waiting_sends = false;
  uint32_t head = 0;
  std::vector<uint32_t> posts;  // streams
};

struct Transfer {
  uint32_t send = 0;  // streams
  uint32_t recv = 0;
  bool via_model = false;  // timed by the CommunicationModel
  TimeNs start;
  EventId completion;
};

struct Simulator::Impl {
  Impl(const ir::Program& program, const cost::CostModel& cost, SimulationOptions options);

  SimulationResult run();

  // Event loop.
  void reset();
  void advance(uint32_t stream);
  // The host issues the stream's current op (reached now); false when that is
  // later than now: the stream then blocks until a kHostIssued event, whose
  // advance() comes back here and resumes the op (true).
  bool issue_on_host(uint32_t stream, const FlatOp& op);
  void drain_worklist();
  void finish_op(uint32_t stream, TimeNs end, const WaitCause* cause);
  void wake_waiters(uint32_t rank, int32_t event, int64_t count, const WaitCause& cause);
  TimeNs scaled_compute(const SimRank& rank, int64_t base_ns) const;
  // Variability hooks (SimulationOptions::perturbation), only for ops whose
  // FlatOp::perturb says so.
  TimeNs perturbed_compute(const StreamState& st, const SimRank& rank, const FlatOp& op) const;
  void apply_perturbation(const ir::Program& program, const std::vector<bool>& flattened);
  // Adds the perturbation's host delays of the stream's current op to its
  // host clock `host` (the op's issue time so far).
  void delay_on_host(uint32_t stream, TimeNs& host) const;
  EventId schedule_completion(TimeNs duration, EngineEvent event);

  // Communication seam: begin_* runs when every participant arrived and
  // schedules the completion; complete_* runs when it pops.
  void arrive_collective(uint32_t stream, const FlatOp& op);
  void begin_collective(uint32_t instance, const FlatOp& op, const SimRank& rank);
  void complete_collective(uint32_t instance);
  void post_p2p(uint32_t stream, const FlatOp& op);
  void begin_transfer(uint32_t send, uint32_t recv);
  void complete_transfer(uint32_t transfer);
  uint32_t new_instance(int32_t group, uint64_t seq);
  // CommunicationModel: after a call, its updates are taken at once, or, if
  // the model deferred work (CommunicationModel::deferred), by a settle event
  // at `now` (one pending at a time) once the calls at this time are in;
  // apply_comm_updates (re)schedules the completions it decided, and its next
  // wakeup (CommunicationModel::next_wakeup).
  void comm_changed();
  void apply_comm_updates();
  void sync_comm_wakeup();
  void comm_wakeup();
  // Interference: a rank's in-flight communication count changes by `delta`.
  void comm_started_or_ended(uint32_t rank, int delta);
  TimeNs interfered_duration(double work_ns, bool slowed) const;
  // Compute slots (SimulationOptions::compute_slots): start the stream's
  // compute op now; a finished op's slot goes to the longest waiter.
  void start_compute(uint32_t stream);
  void release_slot(uint32_t stream);

  // Messages (blocked_ops.cpp).
  std::string where(uint32_t stream) const;
  std::string describe_group(int32_t group) const;
  std::string describe_p2p(uint32_t stream) const;
  BlockedOp describe_blocked(uint32_t stream) const;
  [[noreturn]] void throw_deadlock() const;
  [[noreturn]] void throw_collective_mismatch(const CollectiveInstance& in, uint32_t stream, const FlatOp& op) const;
  [[noreturn]] void throw_p2p_mismatch(uint32_t send, uint32_t recv) const;

  OpSpan span_of(const StreamState& st, TimeNs end) const;
  const FlatOp& current_op(const StreamState& st) const { return classes[ranks[st.rank].cls].ops[st.cursor]; }
  // The counter value a wait of the stream's iteration needs: its value plus
  // the event's records of every earlier iteration.
  int64_t wait_target(const StreamState& st, const FlatOp& wait) const {
    return wait.value +
           static_cast<int64_t>(st.iteration) * classes[ranks[st.rank].cls].records_per_event[static_cast<size_t>(wait.slot)];
  }

  const ir::Program& program;
  SimulationOptions options;
  CommunicationModel* comm_model = nullptr;  // options.communication
  const Perturbation* perturbation = nullptr;  // options.perturbation
  double slowdown = 0;                       // options.compute_slowdown_under_comm
  std::vector<Observer*> observers;
  SimulatedSet simulated;
  CommCostCache comm_costs;

  std::vector<FlatClass> classes;  // index = class id; empty for classes nobody simulated uses
  std::vector<cost::GroupShape> shapes;
  std::vector<GroupInfo> groups;
  std::vector<SimRank> ranks;
  std::vector<int32_t> slot_group;        // [slot_base + slot] → group, -1 none
  std::vector<int32_t> slot_counter;      // [slot_base + slot] → issue counter
  std::vector<uint32_t> endpoint_mailbox;  // [endpoint_base + endpoint] → mailbox
  size_t num_issue_counters = 0;
  size_t num_event_counters = 0;

  // Runtime state, reset by each run().
  std::vector<StreamState> streams;
  // Per stream, its host clock (docs/engine.md#host): when the host issued the
  // latest op the stream reached; stays 0 on streams without host costs. The
  // current op's `issued` is max(ready, host_clock): an op without host costs
  // leaves the clock at an earlier op's issue, never after its own ready, so
  // the hot loop stores nothing for it. Kept apart from StreamState, which
  // the loop touches for every op.
  std::vector<TimeNs> host_clock;
  std::vector<TimeNs> host_reached;  // while kBlockedHost: when the stream reached the op
  std::vector<int64_t> event_counts;
  // Per rank, bit s set while stream s (< 64) is blocked on a wait: a record
  // then only looks at those streams. Streams >= 64 are always checked.
  std::vector<uint64_t> wait_mask;
  std::vector<uint64_t> issue_counts;
  std::vector<GroupRuntime> group_runtime;
  std::vector<CollectiveInstance> instances;
  std::vector<uint32_t> free_instances;
  std::vector<Mailbox> mailboxes;
  std::vector<Transfer> transfers;
  std::vector<uint32_t> free_transfers;
  std::vector<uint32_t> worklist;
  std::vector<OpSpan> member_spans;  // complete_collective's buffer for on_collective
  // Compute slots: free count and the FIFO ring of waiting streams (each
  // stream waits at most once, so streams.size() entries suffice).
  int32_t free_slots = 0;
  std::vector<uint32_t> slot_waiters;
  size_t slot_head = 0;
  size_t slot_count = 0;
  RadixEventQueue<EngineEvent> queue;
  TimeNs now;
  uint32_t last_iteration = 0;          // options.iterations - 1
  std::vector<TimeNs> iteration_ends;  // SimulationResult::iteration_ends
  TimeNs last_end;
  size_t live_streams = 0;  // streams not kDone
  // The model's pending wakeup (comm_wakeups only).
  bool comm_wakeups = false;
  TimeNs wakeup_at = TimeNs::max();
  EventId wakeup_event;
  bool comm_settle_pending = false;  // a kCommSettle is queued
  uint64_t events = 0;
  uint64_t ops_done = 0;
};

}  // namespace lacuna::engine
