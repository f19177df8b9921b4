// The input of one run (sim/run/): a scenario (compiled here) or a program
// written by `lacuna compile`.
#pragma once

#include <cstdint>
#include <string>

#include "sim/cost/cost_model.h"
#include "sim/proto/program.pb.h"
#include "sim/scenario/edits.h"
#include "sim/scenario/scenario.h"

namespace lacuna::run {

// .pb: a binary ir::Program, validated with ir::validate_program after its content digest is checked.
// Anything else: a scenario file (.pbtxt, .textproto, .json), loaded and
// compiled in its placement (placement::compile; LLM-only: compiler::compile).
// Throws lacuna::Error for anything the user can fix.
//
// `planning_cost`: the cost model placements plan with (the one the
// simulation will use, e.g. a calibrated model); null: the analytic model. A
// .pb program is already compiled: `planning_cost` does not apply to it.
// `scale_down` (--scale-down N) divides the scenario's hidden sizes and
// sequence lengths by N before validation and compilation; a .pb program with
// N > 1 is an error (scale the scenario when compiling it instead).
//
// `edits` (--set, --ideal, --seed, --straggler, --slow-link) apply to the
// scenario before presets and validation; a .pb program takes only the
// variability flags, on the variability it was compiled with. The program
// carries the resolved variability (ir::Program.variability; empty when
// every source is off).
ir::Program load_program_input(const std::string& path, const cost::CostModel* planning_cost = nullptr,
                               int64_t scale_down = 1);
ir::Program load_program_input(const std::string& path, const cost::CostModel* planning_cost, int64_t scale_down,
                               const scenario::ScenarioEdits& edits);

// Sets program.variability from the loaded scenario's resolved section (or
// clears it when every source is off): a compiled scenario carries what its
// simulation perturbs.
void attach_variability(ir::Program& program, const scenario::LoadedScenario& loaded);

// The error for --scale-down N > 1 given with a compiled program (.pb) input:
// a program's sizes are fixed when it is compiled. No-op for N ≤ 1.
void reject_scale_down_of_program(const std::string& path, int64_t scale_down);

// A compiled program (.pb) rather than a scenario?
bool is_program_file(const std::string& path);

// A file-name-safe version of a scenario name ("gpt3 175b/x" → "gpt3_175b_x").
std::string file_stem_for(const std::string& scenario_name, const std::string& input_path);

}  // namespace lacuna::run
