// Consecutive iterations in one run, and Monte Carlo samples of the run on a
// pool of threads (docs/outputs.md#iterations-and-samples, docs/metrics.md):
// the runner behind `lacuna simulate --iterations N --samples K -j N`.
#pragma once

#include <cstdint>
#include <functional>

#include "sim/cost/cost_model.h"
#include "sim/engine/simulator.h"
#include "sim/proto/program.pb.h"
#include "sim/report/analyses/monte_carlo.h"
#include "sim/run/network_setup.h"

namespace lacuna::run {

struct SamplingPlan {
  int32_t iterations = 1;
  int32_t samples = 0;  // 0: no Monte Carlo section
  uint64_t seed = 0;  // the run's: --seed, else the scenario's variability seed (set by the caller)
  int jobs = 0;  // 0: one per hardware thread
};

// Whether a run with these options draws anything from its seed: a drawn
// source of the program's variability is on (scenario::any_random_variability),
// or its MoE routing draws expert loads (variability::moe_imbalance_on).
// Otherwise every sample would equal the first.
bool run_is_random(const ir::Program& program, const engine::SimulationOptions& options);

// One bare Monte Carlo sample: the run with seed `seed` (index: its place in
// the sample order), on its own network and Simulator. This is where a source
// of randomness plugs in: the variability model's draws are keyed on
// SimulationOptions::seed, and a factory may as well build a per-sample
// program or cost model from (index, seed).
using SampleRunner = std::function<report::SampleOutcome(size_t index, uint64_t seed, uint64_t& events)>;

// The default runner: `program` on `cost` with `base` (its seed replaced by
// the sample's) and a fresh network of the given mode.
SampleRunner bare_sample_runner(const ir::Program& program, const cost::CostModel& cost, NetworkMode network,
                                const engine::SimulationOptions& base);

// The Monte Carlo samples with any runner: sample 0 is `observed` (seed S),
// samples i = 1..K-1 are run(i, S + i, ...) on o.jobs threads, gathered in
// sample order (the result does not depend on the thread count). `random`
// false: only `observed` runs and stands for all K (the report says so).
report::MonteCarlo run_monte_carlo(const ir::Program& program, const SamplingPlan& o, bool random,
                                   const std::function<report::SampleOutcome()>& observed, const SampleRunner& run,
                                   uint64_t& events);

// The Monte Carlo samples: sample 0 is `observed` (the run with the report's
// observers, seed S), samples 1..K-1 run bare with seeds S + i, each with its
// own network and Simulator on `base` (fold, slots, iterations; no
// communication model: each sample builds its own). Without randomness only
// `observed` runs and stands for all K. `events` receives the events of every
// run.
report::MonteCarlo run_monte_carlo(const ir::Program& program, const cost::CostModel& cost, NetworkMode network,
                                   const engine::SimulationOptions& base, const SamplingPlan& o,
                                   const std::function<report::SampleOutcome()>& observed, uint64_t& events);

}  // namespace lacuna::run
