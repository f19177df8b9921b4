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
};

std::string format_summary(const Summary& summary, const RunStats& run);

}  // namespace lacuna::report
