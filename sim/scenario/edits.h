// Command-line edits of a scenario (`lacuna simulate --set FIELD=VALUE
// --ideal --seed S --straggler host=N:F --slow-link SPEC`, docs/outputs.md):
// applied to the file as parsed, before presets and validation, so an edited
// scenario is checked exactly like a file; a value the flag got wrong, or a
// rule it breaks at its own field, is reported at the flag.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/scenario/scenario.h"

namespace lacuna::scenario {

struct ScenarioEdits {
  bool ideal = false;                   // --ideal: the variability section cleared, ideal: true
  std::vector<std::string> set;         // --set FIELD=VALUE, in order
  int64_t seed = -1;                    // --seed S (-1: not given)
  std::vector<std::string> stragglers;  // --straggler host=N:F
  std::vector<std::string> slow_links;  // --slow-link node=N,nic=K[,dir=up|down]:F (or gpu=G for NVLink)
  bool empty() const { return !ideal && set.empty() && seed < 0 && stragglers.empty() && slow_links.empty(); }
  // Only the variability flags (what a compiled program can take).
  bool only_variability() const { return set.empty(); }
};

// Applies the edits in this order: --ideal, every --set, --seed,
// --straggler, --slow-link. Records each edited field's origin in
// `locations`. Throws lacuna::Error naming the flag for a malformed flag, an
// unknown field or a value of the wrong type.
void apply_edits(Scenario& raw, const ScenarioEdits& edits, SourceMap& locations);

// The variability flags alone, on a section (a compiled program's): --set is
// an error there. The caller resolves and validates the result.
void apply_variability_edits(Variability& variability, const ScenarioEdits& edits, SourceMap& locations);

// One --set FIELD=VALUE on any message (exposed for tests): FIELD is a dotted
// path with [index] for repeated fields and [key] for map entries
// ("cluster.network.tiers[1].oversubscription", "cluster.gpu.efficiency[GEMM].flops");
// VALUE is a protobuf text-format value (a number, an enum name, "quoted",
// {message}, or for a repeated field without [index] a comma-separated list).
// Returns the canonical field path.
std::string set_field(google::protobuf::Message& message, const std::string& assignment, const std::string& flag);

}  // namespace lacuna::scenario
