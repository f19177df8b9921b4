// `lacuna search SCENARIO` as a library call (docs/search.md): enumerate the
// plan space, prune what is invalid or cannot fit, screen the rest with the
// closed-form estimate, then compile and simulate the best K (folded, with
// the network the caller picks) and say how well the screen ranked them.
// Every stage runs over parallel::map_items: threads, and MPI processes when
// started by mpirun; the root gets every candidate back in id order, so the
// result does not depend on how the work was split.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/parallel/processes.h"
#include "sim/run/batch_estimate.h"
#include "sim/run/network_setup.h"
#include "sim/run/simulation_input.h"
#include "sim/scenario/edits.h"
#include "sim/search/plan.h"
#include "sim/search/plan_check.h"
#include "sim/search/plan_space.h"
#include "sim/search/screen.h"

namespace lacuna::search {

struct SearchOptions {
  std::string scenario;
  scenario::ScenarioEdits edits;      // --set: the base scenario's what-ifs
  std::optional<GpuRange> gpus;       // --gpus LO..HI; none: the scenario's GPUs
  double max_memory_gb = 0;           // 0: the GPU's HBM
  std::vector<std::string> fixes;     // --fix FIELD=V[,V...]
  int32_t simulate_top = 50;          // K: the best by the screen, compiled and simulated
  run::NetworkMode network = run::NetworkMode::kFlow;
  int jobs = 0;                       // threads per process (0: one per hardware thread)
  std::string journal;                // where finished simulations are logged for --resume ("" : none)
  bool resume = false;                // reuse the journal's finished simulations
  // --max-host-memory-gb: this machine's memory for the simulations in
  // flight (< 0: 80 % of it; 0: no limit), checked before the first one.
  // Not --max-memory-gb, which is the plans' GPU memory.
  double max_host_memory_gb = -1;
  // --calibration: the simulated plans' kernels timed from a profile (the
  // screen stays the roofline's closed form); checked before anything runs.
  run::CalibrationChoice calibration;
};

// What the simulation of one candidate gave.
struct Simulated {
  double iteration_s = 0;
  double tokens_per_s = 0;
  double mfu = 0;
  int64_t gpus = 0;
  int64_t peak_memory_bytes = 0;
  std::string layout;   // heterogeneous placements: the encoder layouts chosen
  std::string problem;  // compile-failed: why
  bool resumed = false; // taken from the journal
};

struct Candidate {
  Plan plan;
  Fate fate = Fate::kScreened;
  ScreenEstimate screen;             // zero for plans pruned before the screen
  // Set for the simulated plans only (a few of millions): held out of line
  // so that a candidate stays small.
  std::shared_ptr<const Simulated> simulated;
};

struct SearchTimings {
  // compile_s: the plans to simulate compiled and their runs estimated;
  // simulate_s: their runs (and the compiles not kept).
  double enumerate_s = 0, screen_s = 0, compile_s = 0, simulate_s = 0;
  int64_t screened = 0;  // plans the screen estimated
};

struct SearchResult {
  std::string scenario_name;
  int64_t gpus_per_node = 0;
  int64_t memory_limit_bytes = 0;
  int64_t gpu_budget = 0;                    // the most GPUs a plan may use: --gpus HI, else the scenario's
  bool gpu_count_free = false;
  bool moe = false;                          // an MoE scenario: ep and expert_tp columns, the MoE fates
  std::vector<std::string> constraints;      // as given, for the outputs (--calibration included)
  std::vector<Candidate> candidates;         // id order
  std::vector<size_t> ranking;               // simulated candidates, best first (tokens/s, then id)
  std::array<int64_t, kNumFates> fate_counts{};
  std::optional<double> rank_correlation;    // Spearman, screen vs simulation, over the simulated set
  SearchTimings timings;
  std::optional<run::BatchEstimate> estimate;  // the simulate stage's, on the root (none: nothing to simulate)
  int processes = 1;
  int threads = 1;
};

// Progress of the current stage on this process: stage name, done, total,
// the best tokens/s so far (0: none yet).
using SearchProgress = std::function<void(const char* stage, size_t done, size_t total, double best)>;

// Runs the search. On the root the result is complete; elsewhere it holds
// only what every process knows (no candidates). Throws lacuna::Error for
// bad input (unknown --fix field, empty space, a journal of another search).
// Told, on the root, what the simulate stage will cost once every plan to
// simulate is compiled, before the first simulation.
using SearchEstimated = std::function<void(const run::BatchEstimate&)>;

SearchResult run_search(const SearchOptions& options, const parallel::World& world,
                        const SearchProgress& progress = {}, const SearchEstimated& on_estimate = {});

// Spearman's rank correlation of two equally long series (ties take their
// average rank); nullopt under 3 points or when either series is constant.
std::optional<double> spearman(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace lacuna::search
