// Scenario → per-rank programs (the IR of sim/proto/program.proto).
#pragma once

#include <vector>

#include "sim/core/units.h"
#include "sim/proto/program.pb.h"
#include "sim/scenario/scenario.h"

namespace lacuna::compiler {

// Throws lacuna::Error (with the scenario's locations) for what validation
// could not know, e.g. a program too large to build.
ir::Program compile(const scenario::LoadedScenario& scenario);

// What a placement may change in the LLM's schedule (Optimus's dependency-point
// deferral; docs/placements.md, "Deferral").
struct CompileOptions {
  int32_t interleaved_warmup_deferral = 0;  // schedule::PipelineShape::warmup_deferral
};
ir::Program compile(const scenario::LoadedScenario& scenario, const CompileOptions& options);

}  // namespace lacuna::compiler
