// The summary table `lacuna simulate` prints. Unlike the JSON it may contain
// wall-clock values (simulation time, events/s), passed in RunStats.
#pragma once

#include <cstdint>
#include <string>

#include "sim/report/summary.h"

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
};

std::string format_summary(const Summary& summary, const RunStats& run);

}  // namespace lacuna::report
