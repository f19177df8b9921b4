// Goodput over a whole training run (issue 36): a seeded Monte Carlo of a job
// that needs a given amount of productive time, checkpoints at an interval,
// and is interrupted by failures of its components, each followed by a
// recovery of named phases and the recomputation of the work lost since the
// last durable checkpoint (docs/goodput-sources.md has the public figures a
// caller fills these from).
//
// The model, per run:
// - the job computes; after every `checkpoint.interval_s` of progress it
//   blocks for `checkpoint.save_blocking_s` (the copy out of GPU memory, no
//   progress), and the checkpoint becomes durable `checkpoint.upload_s` later
//   (the asynchronous upload; a failure before then restores the previous
//   one). The storage takes one upload at a time: a save due while the last
//   one still uploads waits for it, blocking the job;
// - failures arrive as one Poisson process per component kind, rate =
//   count × rate per component-hour, superposed: the next failure after
//   an exponential time of rate Λ = Σ count·rate, its kind drawn with
//   probability count·rate / Λ. Failures strike while the job runs (computing
//   or saving), not during a recovery: a recovery's own failures are folded
//   into its phase times;
// - a failure costs the recovery phases of its kind (detection, diagnosis and
//   eviction, replacement, relaunch with communicator set-up, checkpoint
//   load), then the job resumes from its last durable checkpoint, so the
//   progress since then is lost and computed again.
//
// Runs are independent and keyed by their index (counter-based draws,
// sim/core/counter_rng.h), so results are identical for any thread count.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lacuna::goodput {

// One kind of component that fails: how many the job holds and how often
// each fails. `recovery` phases are in seconds.
struct RecoveryPhases {
  double detection_s = 0;    // the failure noticed (heartbeat, timeout, hang detection)
  double diagnosis_s = 0;    // localised and the culprit evicted
  double replacement_s = 0;  // a spare swapped in (or the wait for a repair)
  double relaunch_s = 0;     // processes restarted, communicators initialised
  double load_s = 0;         // the checkpoint read back
  double total_s() const { return detection_s + diagnosis_s + replacement_s + relaunch_s + load_s; }
};
inline constexpr int kNumRecoveryPhases = 5;
// "detection", "diagnosis", "replacement", "relaunch", "load".
const char* recovery_phase_name(int phase);

struct ComponentKind {
  std::string name;           // "gpu", "host", ...
  double count = 0;           // components of this kind in the job
  double rate_per_hour = 0;   // failures per component-hour
  RecoveryPhases recovery;
};

struct CheckpointPlan {
  double interval_s = 0;         // productive time between saves; 0: never checkpoint
  double save_blocking_s = 0;    // the job stalls this long per save
  double upload_s = 0;           // then durable this much later
};

struct GoodputInputs {
  double work_s = 0;  // productive time the job needs (iterations × iteration time)
  std::vector<ComponentKind> components;
  CheckpointPlan checkpoint;
  int32_t runs = 1000;
  uint64_t seed = 1;
};

// Where a run's time went, in seconds.
struct TimeBreakdown {
  double productive_s = 0;   // work kept (= work_s)
  double recomputed_s = 0;   // work lost to failures and done again
  double checkpoint_s = 0;   // blocking saves (including those whose work was lost)
  double recovery_s[kNumRecoveryPhases] = {};
  double total_s() const;
};

struct GoodputResult {
  int32_t runs = 0;
  // Effective training time ratio, work_s / wall time, over the runs: mean,
  // standard deviation and the half-width of its 95 % confidence interval
  // (normal approximation, 1.96 · sd / √runs).
  double ettr_mean = 0, ettr_sd = 0, ettr_ci95 = 0;
  double wall_mean_s = 0, wall_ci95_s = 0;  // the run's wall time
  double failures_mean = 0;
  // Mean time lost per run, by phase and by component kind (recovery
  // phases plus the recomputed work of that kind's failures).
  TimeBreakdown mean;
  std::vector<double> lost_by_component_s;  // in GoodputInputs::components order
  std::vector<double> failures_by_component;  // mean count per run
};

// Throws lacuna::Error for negative or non-finite inputs, no work, or a
// failure rate with no recovery time and no checkpoint (which can never
// finish).
GoodputResult simulate_goodput(const GoodputInputs& in);

// Λ: failures per second of running, over every component.
double failure_rate_per_s(const std::vector<ComponentKind>& components);

// Closed forms for one recovery time R (every kind's the same), checkpoints
// durable at once (upload 0), failures only while running, as the model
// assumes: a stretch of w seconds of running between durable checkpoints
// takes (1/Λ + R)(e^{Λw} − 1) seconds in expectation: e^{Λw} − 1 failed
// attempts on average (geometric, success e^{−Λw}), each losing
// 1/Λ − w/(e^{Λw} − 1) of running on average plus R, then w. With k
// full intervals τ in work_s = k·τ + r, the job runs k stretches of τ + δ
// (the last one's save included) and one of r.
double expected_stretch_s(double rate_per_s, double restart_s, double stretch_s);
double expected_wall_s(double rate_per_s, double restart_s, double work_s, double interval_s, double save_s);

// Young's first-order optimum interval (Young 1974): √(2·δ·M), M = 1/Λ the
// job's mean time between failures, δ the blocking save.
double young_interval_s(double save_s, double mtbf_s);
// Daly's higher-order estimate (Daly 2006, eq. 37, as LLNL's SCR library
// implements it; docs/goodput-sources.md §5): for δ < 2M,
// √(2δM)·[1 + √(δ/(2M))/3 + δ/(18M)] − δ, else M.
double daly_interval_s(double save_s, double mtbf_s);

}  // namespace lacuna::goodput
