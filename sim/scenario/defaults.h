// Documented defaults of fields a scenario may leave unset
// (docs/scenario.md#defaults), applied by the loader after the hardware
// preset and before validation. A field written in the file, even as 0, is
// the user's value and is left for validation to judge.
#pragma once

#include <vector>

#include "sim/scenario/scenario.h"

namespace lacuna::scenario {

// Fills, in this order: parallel.tp, cp, pp, virtual_stages (1 each);
// parallel.dp (GPUs / (tp·cp·pp) when that divides and no encoder takes ranks
// of its own); for MoE models parallel.ep (1) and parallel.expert_tp (tp),
// reported but left 0 (the schema's own meaning of 0);
// schedule.kind (ONE_F_ONE_B, or INTERLEAVED_1F1B with virtual_stages > 1);
// training.micro_batch (1). Returns what it filled, with the reason.
std::vector<FilledDefault> apply_defaults(Scenario& spec, const SourceMap& locations);

}  // namespace lacuna::scenario
