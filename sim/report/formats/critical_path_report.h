// The critical-path and straggler sections of `lacuna simulate`'s outputs
// (--critical-path, --stragglers): terminal blocks and JSON values
// (docs/critical-path.md, docs/outputs.md).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "sim/report/analyses/critical_path.h"
#include "sim/report/observers/stragglers.h"

namespace lacuna::report {

// Terminal blocks, each starting with a blank line. `top` rows per table.
std::string format_critical_path(const CriticalPathReport& report, size_t top = 8);
std::string format_stragglers(const StragglerSummary& stragglers, size_t top = 8);

// The sentence the straggler block opens with, for the largest host row (or
// rank row when no group spans hosts): "host 154 (ranks 1232–1239) was the
// last to arrive in 37.0 % of its dp reduce_scatters and cost 41.000 ms per
// iteration". Empty when nothing straggled.
std::string straggler_headline(const StragglerSummary& stragglers);

nlohmann::ordered_json critical_path_json(const CriticalPathReport& report);
nlohmann::ordered_json stragglers_json(const StragglerSummary& stragglers);

}  // namespace lacuna::report
