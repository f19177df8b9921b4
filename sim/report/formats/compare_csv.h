// `lacuna compare --csv FILE`: one row per placement (docs/outputs.md#csv),
// with the columns every lacuna CSV shares (run_metrics.h) after compare's
// own: the placement, whether it ran and fits, its rank and speedup, and the
// encoder compute hidden in bubbles.
#pragma once

#include <string>

#include "sim/report/analyses/compare_report.h"

namespace lacuna::report {

std::string comparison_csv(const Comparison& comparison);

}  // namespace lacuna::report
