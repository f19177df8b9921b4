// Monte Carlo samples of a run (`lacuna simulate --samples K --seed S`,
// docs/metrics.md#monte-carlo): K independent simulations, sample i with seed
// S + i, run on a pool of threads and gathered in sample order, so the result
// is the same for any thread count. Each sample's iteration time is its
// steady-state mean (docs/metrics.md#iterations); the summary gives the mean,
// p50, p90 and p99 of iteration time and MFU with 95 % confidence intervals.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/core/parallel_map.h"
#include "sim/core/units.h"
#include "sim/proto/program.pb.h"
#include "sim/report/analyses/sample_stats.h"

namespace lacuna::report {

// Sample i's seed: S + i (mod 2^64). Sample 0 is the run `--seed S` alone
// would give, and any sample can be re-run on its own with --seed S + i.
inline uint64_t sample_seed(uint64_t seed, uint64_t index) { return seed + index; }

// What one sample gives: the ends of its iterations (SimulationResult::
// iteration_ends).
struct SampleOutcome {
  uint64_t seed = 0;
  std::vector<TimeNs> iteration_ends;
};

struct MonteCarlo {
  int32_t samples = 0;
  uint64_t seed = 0;
  int32_t iterations = 1;
  // No source of randomness in the run (no variability model): every sample
  // would equal the first, so it ran once and every statistic is that value,
  // its intervals exact ([v, v]).
  bool identical = false;
  std::vector<SampleOutcome> per_sample;    // in sample order
  std::vector<double> iteration_time_s;     // per sample: steady-state mean
  std::vector<double> mfu;                  // per sample
  Distribution iteration_time;              // of iteration_time_s
  Distribution mfu_distribution;            // of mfu
};

// The statistics of `outcomes` (sample order). `identical`: one outcome that
// stands for all `samples`.
MonteCarlo summarize_samples(std::vector<SampleOutcome> outcomes, int32_t samples, uint64_t seed, bool identical,
                             const ir::ProgramInfo& info, int32_t num_gpus);

// Runs sample(i, sample_seed(seed, i)) for i in [0, count) on `jobs` threads
// (0: one per hardware thread); results in sample order.
template <class F>
std::vector<SampleOutcome> run_samples(int32_t count, uint64_t seed, int jobs, F&& sample) {
  return parallel_map(static_cast<size_t>(count), resolve_jobs(jobs),
                      [&](size_t i) -> SampleOutcome { return sample(i, sample_seed(seed, i)); });
}

// The `monte_carlo` JSON value (one line) and the terminal block.
std::string monte_carlo_json(const MonteCarlo& mc);
std::string format_monte_carlo(const MonteCarlo& mc);

}  // namespace lacuna::report
