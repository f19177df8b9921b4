// The discrete-event simulator: runs one or more consecutive iterations of a
// Program (all ranks, or one representative per class of identical ranks) on a
// cost model and tells observers every op's start and end.
//
// No global state: several Simulators may run in one process. Time is integer
// nanoseconds; simultaneous events run in (time, sequence) order, where the
// sequence number is assigned when an event is scheduled, so every run of the
// same inputs is identical.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/core/units.h"
#include "sim/cost/cost_model.h"
#include "sim/engine/communication_model.h"
#include "sim/engine/observer.h"
#include "sim/engine/perturbation.h"
#include "sim/proto/program.pb.h"

namespace lacuna::engine {

// How far a run is, for a progress display (docs/performance.md#progress).
// Called from the event loop every kProgressEveryEvents events and at no
// other time, on the loop's thread; must not throw. `ops_total`: the ops of
// every simulated stream over all iterations, so ops_done / ops_total is the
// fraction done.
class ProgressSink {
 public:
  virtual ~ProgressSink() = default;
  virtual void on_progress(uint64_t events, uint64_t ops_done, uint64_t ops_total, TimeNs now) = 0;
};
// 2^16: about 10 calls per second at 7 M events/s, one test per event.
inline constexpr uint64_t kProgressEveryEvents = uint64_t{1} << 16;

struct SimulationOptions {
  // Simulate one representative per class of identical ranks (same RankClass,
  // same compute_time_scale, symmetric groups). A rank given its own class or
  // speed is simulated on its own.
  bool fold = false;
  // Times collectives and transfers with contention (e.g. the flow-level
  // network) instead of the CostModel's fixed durations. Not owned; must
  // outlive run(). Ops with a fixed duration in the program keep it.
  CommunicationModel* communication = nullptr;
  // Compute ops run this much slower while an NCCL operation (collective or
  // transfer) is in flight on the same rank: 0.1 = 10 % slower. 0 disables.
  double compute_slowdown_under_comm = 0;
  // At most this many compute kernels run at once over all ranks (0: no
  // limit): one host whose N cores the ranks share, as `lacuna execute
  // --backend cpu --compute-slots N` runs them. A compute op reached while
  // every slot is busy waits (first come, first served; ties in event order)
  // and starts when it gets one; fixed-duration compute takes no slot.
  // Needs every rank simulated (not with fold).
  int32_t compute_slots = 0;
  // Consecutive iterations of the program in one run (>= 1). A stream that
  // finishes iteration k starts iteration k + 1 at once (no barrier beyond the
  // program's own collectives, transfers and events; docs/engine.md#iterations).
  int32_t iterations = 1;
  // The run's random seed (a Monte Carlo sample's, `--seed` / `--samples`).
  // The engine itself draws nothing from it: it is there for the variability
  // model (engine::Perturbation), which keys its draws on it.
  uint64_t seed = 0;
  // Variability (docs/variability.md): per-rank speed, per-op compute noise
  // and host delays. Not owned; must outlive run(). Null: the ideal cluster,
  // at no cost to the event loop. With fold, a representative takes the
  // largest rank_compute_factor of the ranks it stands for (the slowest
  // member sets its class's pace); per-op hooks need every rank simulated.
  const Perturbation* perturbation = nullptr;
  // Told how far the run is (ProgressSink). Not owned; must outlive run().
  // Null: no progress, at no cost to the event loop beyond one test.
  ProgressSink* progress = nullptr;
};

struct SimulationResult {
  TimeNs end_time;      // the run's end: last op end over all simulated ranks (one iteration: its time)
  uint64_t events = 0;  // events the engine processed
  std::vector<int32_t> simulated_ranks;
  uint64_t ops = 0;  // ops completed over all simulated ranks (records and waits included)
  // Per iteration k, the last end of an op of iteration k over all simulated
  // ranks (non-decreasing; the last is end_time). Iteration k's time is
  // iteration_ends[k] - iteration_ends[k - 1] (k = 0: iteration_ends[0]).
  std::vector<TimeNs> iteration_ends;
};

// One op a deadlocked stream is stuck on.
struct BlockedOp {
  int32_t rank = 0;
  std::string stream;
  int32_t op = 0;
  std::string description;  // e.g. "recv from rank 3 (channel 0, tag 17): no matching send was reached"
};

// Thrown when no event is left but some streams have ops left.
class DeadlockError : public Error {
 public:
  DeadlockError(const std::string& message, std::vector<BlockedOp> blocked)
      : Error(message), blocked_(std::move(blocked)) {}
  const std::vector<BlockedOp>& blocked() const { return blocked_; }

 private:
  std::vector<BlockedOp> blocked_;
};


class Simulator {
 public:
  // `program` and `cost` must outlive the Simulator. Validates the program.
  Simulator(const ir::Program& program, const cost::CostModel& cost, SimulationOptions options = {});
  ~Simulator();
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  void add_observer(Observer* observer);  // not owned; must outlive run()

  // Runs the iteration(s) once. Throws DeadlockError, or lacuna::Error for
  // mismatched communication (collective kinds/bytes, p2p tags).
  SimulationResult run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lacuna::engine
