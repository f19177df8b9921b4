// Optimus (ATC'25): encoder and LLM colocated on every GPU with separate
// plans; encoder kernels scheduled into the LLM's bubbles
// (docs/placements.md, "Optimus").
#pragma once

#include "sim/cost/cost_model.h"
#include "sim/proto/program.pb.h"
#include "sim/scenario/scenario.h"

namespace lacuna::placement {

// Plans (or takes the encoders' fixed layout), schedules and emits the
// per-rank programs; ProgramInfo.optimus says what was decided.
ir::Program compile_optimus(const scenario::LoadedScenario& scenario, const cost::CostModel& cost);

}  // namespace lacuna::placement
