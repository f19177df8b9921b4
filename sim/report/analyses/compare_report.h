// `lacuna compare`: one multimodal workload under every applicable placement,
// side by side (docs/compare.md). This file holds the results and the
// derived metrics, the terminal table and the JSON; tools/cli/cmd_compare.cpp
// compiles and simulates.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/proto/scenario.pb.h"
#include "sim/report/analyses/summary.h"

namespace lacuna::report {

// One placement's outcome: simulated (summary set) or not (error says why:
// not applicable, failed to compile, deadlocked, ...).
struct PlacementOutcome {
  scenario::PlacementKind kind = scenario::PLACEMENT_UNSPECIFIED;
  std::optional<Summary> summary;
  std::string error;   // the full message (JSON)
  std::string reason;  // shorter, for the table (no file location); empty: `error`
  // Why the placement's program exceeds the HBM capacity even at the
  // recompute its planner chose (placement::infeasibility_reason); empty:
  // it fits (docs/memory-model.md#feasibility).
  std::string over_memory;
  // HETEROGENEOUS only: its mode, "colocated" or "non-colocated" (compare
  // runs both, placement::choose_heterogeneous), and the layout chosen
  // (HeteroChoice::description). Empty for the other placements.
  std::string variant;
  std::string layout;
  bool fits() const { return over_memory.empty() && (!summary || summary->over_capacity_ranks == 0); }
};

// The placement's name in tables ("heterogeneous colocated") and its key in
// the JSON ranking ("HETEROGENEOUS_COLOCATED"; the others: the scenario
// spelling, "OPTIMUS").
std::string outcome_name(const PlacementOutcome& outcome);
std::string outcome_key(const PlacementOutcome& outcome);

struct Comparison {
  std::string scenario_name;
  std::string scenario_file;
  std::string cost_model;
  bool folded = true;
  // The LLM alone (the scenario without its encoders), the reference for the
  // hidden fraction; unset when it could not be simulated (llm_only_error).
  std::optional<Summary> llm_only;
  std::string llm_only_error;
  std::vector<PlacementOutcome> placements;  // table order
};

// Idle time per GPU by category: the mean over all GPUs of the job (fold: a
// simulated rank weighs as many ranks as it stands for), in ns. Means add up:
// the categories sum to `total`, and total + mean busy = the iteration time.
struct MeanBubbles {
  std::array<int64_t, kNumBubbles> by_category{};  // indexed by Bubble
  int64_t total = 0;
  int64_t of(Bubble b) const { return by_category[static_cast<size_t>(b)]; }
};
MeanBubbles mean_bubbles(const Summary& summary);

// Encoder compute hidden in bubbles:
//   h = 1 − (T_placement − T_llm_only) / E,   clamped to [0, 1],
// E = the encoder compute time of the placement's busiest GPU (max over ranks
// of compute ops with module > 0). nullopt when E = 0 or T_llm_only unknown.
std::optional<double> encoder_hidden_fraction(TimeNs placement, std::optional<TimeNs> llm_only,
                                              TimeNs encoder_compute_max);

// The placements that simulated and fit HBM, fastest first (ties: table
// order), as indices into comparison.placements. Only these are ranked.
std::vector<size_t> feasible_ranking(const Comparison& comparison);

// Derived per placement (unset fields: not simulated / not defined).
struct PlacementMetrics {
  std::optional<int32_t> rank;    // 1 = fastest of those that fit; unset: failed or over HBM
  // T_baseline / T_placement, when both the Megatron baseline and this
  // placement simulated and fit HBM (a run that cannot happen is no reference).
  std::optional<double> speedup;
  std::optional<double> encoder_hidden;
  MeanBubbles bubbles;
};
PlacementMetrics placement_metrics(const Comparison& comparison, size_t index);

// Wall-clock facts for the terminal only (never in the JSON).
struct CompareRunStats {
  double total_wall_seconds = 0;
  std::optional<double> optimus_planner_seconds;  // compile_as(OPTIMUS), planner + scheduler
};

std::string format_comparison(const Comparison& comparison, const CompareRunStats& run);

// Deterministic JSON (docs/compare.md): one line per top-level key and
// one line per placement.
std::string comparison_json(const Comparison& comparison);

}  // namespace lacuna::report
