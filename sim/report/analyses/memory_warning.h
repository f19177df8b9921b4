// The warning `lacuna simulate` prints when ranks exceed their GPU's HBM
// (docs/outputs.md, "Memory feasibility"): such an iteration would stop with
// an out-of-memory error, so the numbers around it describe a run that cannot
// happen. It is boxed and printed before and after the summary table, and on
// stderr, so that it cannot be missed.
#pragma once

#include <string>

#include "sim/core/option_text.h"
#include "sim/report/analyses/summary.h"

namespace lacuna::report {

// The exit status of `lacuna simulate --strict-memory` when ranks exceed HBM
// (0 ok, 2 user error, 3 deadlock, 70 internal error are taken).
inline constexpr int kExitOverCapacity = 4;

// "" when every rank fits (or the capacity is unknown); else the box:
//   WARNING: n of N ranks exceed HBM (peak X GB > Y GB): this iteration
//   cannot run as configured
// with the worst rank's breakdown (baseline, activations, allocator reserve)
// and what reduces it. Lines end with '\n'.
std::string memory_warning(const Summary& summary, const OptionSpelling& spell = neutral_option);

}  // namespace lacuna::report
