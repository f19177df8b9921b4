// The machine-readable summary (--json): deterministic, no wall-clock values.
// Schema in docs/outputs.md. One line per top-level key and per rank so that
// 3,072 ranks stay compact and diffable.
#pragma once

#include <string>

#include "sim/report/analyses/summary.h"

namespace lacuna::report {

std::string summary_json(const Summary& summary);

}  // namespace lacuna::report
