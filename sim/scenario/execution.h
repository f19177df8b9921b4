// Execution semantics: which switches of the training software a scenario
// runs with (scenario.proto's Execution). A software preset gives the defaults
// of one Megatron-LM era, read in its source (docs/scenario.md#execution);
// switches the scenario sets override them.
#pragma once

#include <string>
#include <vector>

#include "sim/scenario/checks.h"

namespace lacuna::scenario {

// The preset used when execution.software is empty.
inline constexpr const char* kDefaultSoftware = "megatron-core-0.12";

// Known software presets, in a fixed order.
std::vector<std::string> software_preset_names();

// Every switch of `spec.execution()` resolved: the software preset's default
// for each switch the scenario leaves unset (pipeline_p2p by schedule kind:
// Megatron-core overlaps p2p only in the interleaved schedule). Idempotent.
// Throws lacuna::Error located at execution.software for an unknown name.
Execution resolve_execution(const Scenario& spec, const SourceMap& locations);

// Checks the resolved switches against the plan: ranges, and the combinations
// Megatron-LM rejects (each error says which check of which file rejects it).
void validate_execution(const Scenario& spec, const Checker& c);

}  // namespace lacuna::scenario
