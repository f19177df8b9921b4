// The summary table `lacuna simulate` prints. Unlike the JSON it may contain
// wall-clock values (simulation time, events/s), passed in RunStats.
#pragma once

#include <cstdint>
#include <string>

#include "sim/report/analyses/summary.h"

namespace lacuna::report {

struct RunStats {
  double wall_seconds = 0;
  uint64_t events = 0;
  // The last row: "simulation … events" for `simulate`; `execute` reports
  // the ops it ran.
  std::string label = "simulation";
  std::string unit = "events";
  // Replaces the "mode" row's text when set (execute: which ranks ran).
  std::string mode;
  // An "estimate" row before the last one when set (simulate: what the run
  // was estimated to need before it started, describe_estimate()).
  std::string estimate;
  // A "tip" row after the last one when set (simulate: fold_tip).
  std::string tip;
};

// When a full-rank run took over `kFoldTipSeconds` and could have folded (no
// variability, no samples, no compute slots, and folding simulates fewer
// ranks): "--fold simulates 8 of 3072 ranks (about 57.076 k events, against
// this run's 16.330 M events); ...". The folded run's events come from the
// pre-run estimate (`folded_events`, 0: not said); no time is promised: the
// folded run processes events at another rate (GPT-3 175B, 3,072 GPUs: ranks
// / 384, events / 285, wall time / 38; docs/performance.md#progress).
// "" otherwise.
inline constexpr double kFoldTipSeconds = 2.0;
// `flow_network`: the run used the flow network, under which a folded run
// leaves out the unsimulated ranks' own traffic (docs/network.md#folded-runs).
std::string fold_tip(double wall_seconds, int32_t all_ranks, int32_t folded_ranks, bool flow_network,
                     uint64_t folded_events = 0, uint64_t run_events = 0);

std::string format_summary(const Summary& summary, const RunStats& run);

}  // namespace lacuna::report
