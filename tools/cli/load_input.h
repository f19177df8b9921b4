// What `lacuna simulate` accepts: a scenario (compiled here) or a program
// written by `lacuna compile`.
#pragma once

#include <string>

#include "sim/cost/cost_model.h"
#include "sim/proto/program.pb.h"

namespace lacuna::cli {

// .pb: a binary ir::Program, validated with engine::validate_program.
// Anything else: a scenario file (.pbtxt, .textproto, .json), loaded and
// compiled in its placement (placement::compile; LLM-only: compiler::compile).
// Throws lacuna::Error for anything the user can fix.
ir::Program load_program_input(const std::string& path);

// The same, with the cost model placements plan with (the one the simulation
// will use, e.g. a calibrated model). Null: the analytic model, as above. A
// .pb program is already compiled: `planning_cost` does not apply to it.
ir::Program load_program_input(const std::string& path, const cost::CostModel* planning_cost);

// A compiled program (.pb) rather than a scenario?
bool is_program_file(const std::string& path);

// A file-name-safe version of a scenario name ("gpt3 175b/x" → "gpt3_175b_x").
std::string file_stem_for(const std::string& scenario_name, const std::string& input_path);

}  // namespace lacuna::cli
