// Before a `simulate` run: how many events it will process and how much
// memory it will add, and the refusal when that would not fit
// (docs/performance.md#estimate). A run that would exhaust the machine stops
// here with a message naming --max-memory-gb, not minutes later with
// std::bad_alloc or the kernel's OOM killer.
#pragma once

#include <cstdint>
#include <string>

#include "sim/core/units.h"
#include "sim/engine/run_estimate.h"
#include "sim/engine/simulator.h"
#include "sim/proto/program.pb.h"
#include "sim/run/monte_carlo_runner.h"

namespace lacuna::run {

struct RunEstimate {
  engine::EngineEstimate engine;  // one run (sample 0, or any sample)
  // Runs in flight at once: the observed run, and with --samples K the
  // samples sharing the thread pool (K and -j bound it).
  int32_t concurrent_runs = 1;
  uint64_t events = 0;  // over the observed run and every sample (EngineEstimate::events)
  uint64_t host_events = 0;  // at most this many more (EngineEstimate::host_events)
  Bytes engine_state;     // the engine's state over the concurrent runs
  Bytes sample_programs;  // each concurrent sample's own copy of the program
  Bytes accounting;       // bubble and communication accounting (the observed run only)
  // The flow network's state built during the run (topology, solver and
  // ledger records per link; cached link usages and flows per simulated
  // rank), over the concurrent runs, each of which builds its own: measured
  // (kFlowBytesPerClusterGpu, kFlowBytesPerSimulatedRank).
  Bytes network;
  Bytes total() const { return engine_state + sample_programs + accounting + network; }
};

// What the flow network builds during a run (it is built lazily, at the
// run's first communication), measured as the peak resident set of
// `simulate --network flow` less that of `--network analytic`
// (docs/performance.md#estimate):
// - per GPU of the cluster, its topology and the solver's and ledger's
//   per-link records, from folded runs (a few ranks simulated): 2,526 B at
//   12,288 GPUs (the MegaScale layout), 2,835 B at 131,072 and 2,428 B at
//   999,424 (GPT-3 175B scaled); the largest is taken;
// - per simulated rank, its collectives' cached link usages and flows: the
//   full-rank run's delta at 12,288 GPUs, 5,036 B per rank, less the 2,526 B
//   per GPU of the same cluster.
inline constexpr int64_t kFlowBytesPerClusterGpu = 2'835;
inline constexpr int64_t kFlowBytesPerSimulatedRank = 2'510;

// `base`: the observed run's options (fold, iterations). Samples beyond the
// first count when the program draws anything (run_is_random); otherwise the
// observed run stands for all of them and runs alone.
RunEstimate estimate_run(const ir::Program& program, const engine::SimulationOptions& base, const SamplingPlan& sampling,
                         NetworkMode network);

// "16.330 M events (up to 39.300 M events with late hosts), 21.6 MB beyond the
// program".
std::string describe_estimate(const RunEstimate& estimate);

// What this process holds now (resident set, /proc/self/statm); zero where
// the system does not say.
Bytes resident_bytes();
// 80 % of this machine's physical memory (zero where unknown: no limit).
Bytes default_memory_limit();
// `gb` from --max-memory-gb: < 0 picks default_memory_limit(), 0 means no
// limit.
Bytes memory_limit_from_gb(double gb);

// Throws lacuna::Error naming `option` when `resident` plus the estimate
// exceeds `limit` (> 0), with the parts and what to do.
void check_run_memory(const RunEstimate& estimate, Bytes resident, Bytes limit, const std::string& option);

}  // namespace lacuna::run
