// The scenario's `variability` section (docs/variability.md): the hardware
// preset's defaults under the scenario's own fields, and which sources end up
// on. Validation is validate_variability (checks.h).
#pragma once

#include <string>

#include "sim/proto/scenario.pb.h"

namespace lacuna::scenario {

// Every unset field from variability_preset(hardware preset), unless `ideal`
// (then unset means off). Idempotent; the result always has a seed.
Variability resolve_variability(const Variability& user, const std::string& hardware_preset_name);

// Which sources a resolved section turns on.
bool any_kernel_noise(const Variability& v);
bool any_host_pauses(const Variability& v);
bool any_link_flaps(const Variability& v);
bool any_link_variability(const Variability& v);  // slow or flapping links
bool any_variability(const Variability& v);       // anything at all
// Does the seed change anything (a drawn source is on)? Explicit straggler
// hosts and slow links alone are the same in every Monte Carlo sample.
bool any_random_variability(const Variability& v);

// Validates a section on its own (a compiled program's, after command-line
// edits) against the cluster it runs on: the rules of
// docs/scenario.md#variability, errors located through `locations`.
class SourceMap;
void validate_variability_section(const Variability& v, const Cluster& cluster, const SourceMap& locations);

// The section a compiled program carries (ir::Program.variability): the
// resolved section when a source is on, else an empty message, so that a
// program of the ideal cluster keeps its bytes.
Variability program_variability(const Scenario& resolved_spec);

}  // namespace lacuna::scenario
