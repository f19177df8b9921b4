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

}  // namespace lacuna::compiler
