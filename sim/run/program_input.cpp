#include "sim/run/program_input.h"

#include <filesystem>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/core/input_file.h"
#include "sim/core/option_text.h"
#include "sim/core/quiet_protobuf.h"
#include "sim/engine/simulator.h"
#include "sim/ir/digest.h"
#include "sim/ir/validate.h"
#include "sim/placement/compile.h"
#include "sim/scenario/scenario.h"
#include "sim/scenario/variability.h"
#include "sim/variability/variability_model.h"

namespace lacuna::run {

bool is_program_file(const std::string& path) { return std::filesystem::path(path).extension() == ".pb"; }

void reject_scale_down_of_program(const std::string& path, int64_t scale_down) {
  if (scale_down <= 1) return;
  throw Error(SourceLocation{path, 0, 0, "‹scale-down›"},
              "‹scale-down› applies to scenarios; this is a compiled program, whose sizes were fixed when it was "
              "compiled",
              "compile the scenario with `lacuna compile` and " + option_ref("scale-down", std::to_string(scale_down)) +
                  ", or pass the scenario itself with " + option_ref("scale-down", std::to_string(scale_down)));
}

ir::Program load_program_input(const std::string& path, const cost::CostModel* planning_cost, int64_t scale_down) {
  return load_program_input(path, planning_cost, scale_down, scenario::ScenarioEdits{});
}

ir::Program load_program_input(const std::string& path, const cost::CostModel* planning_cost, int64_t scale_down,
                               const scenario::ScenarioEdits& edits) {
  if (is_program_file(path)) {
    reject_scale_down_of_program(path, scale_down);
    const std::string bytes = read_input_file(path, kProgramInput);
    ir::Program program;
    const QuietProtobuf quiet;
    if (!program.ParseFromString(bytes)) {
      throw Error(SourceLocation{path, 0, 0, {}}, "not a lacuna program (binary ir::Program)",
                  "write one with `lacuna compile SCENARIO -o FILE.pb`, or pass the scenario itself");
    }
    if (ir::check_content_digest(program, path) == ir::DigestCheck::kUnchecked) {
      fmt::print(stderr,
                 "lacuna: warning: {}: info.content_digest is \"unchecked\": a hand-edited program, loaded without "
                 "its digest; every result describes the edit\n",
                 path);
    }
    ir::validate_program(program, path);
    scenario::SourceMap locations;
    locations.set_file(path);
    scenario::Variability v = program.variability();
    if (!edits.empty()) {
      scenario::apply_variability_edits(v, edits, locations);
      v = scenario::resolve_variability(v, program.cluster().preset());
    }
    scenario::validate_variability_section(v, program.cluster(), locations);
    if (scenario::any_variability(v)) {
      *program.mutable_variability() = v;
    } else if (variability::moe_imbalance_on(program)) {
      // MoE routing draws from the seed alone (docs/moe.md#load-imbalance).
      program.clear_variability();
      program.mutable_variability()->set_seed(v.seed());
    } else {
      program.clear_variability();
    }
    return program;
  }
  // LLM-only scenarios compile exactly as before (compiler::compile); a
  // multimodal one in its own placement (placement.kind).
  const scenario::LoadedScenario loaded = scenario::load_scenario(path, scale_down, edits);
  ir::Program program =
      planning_cost != nullptr ? placement::compile(loaded, *planning_cost) : placement::compile(loaded);
  attach_variability(program, loaded);
  return program;  // validated by what runs it (the simulator, the executor's plan)
}

void attach_variability(ir::Program& program, const scenario::LoadedScenario& loaded) {
  if (scenario::any_variability(loaded.spec.variability())) {
    *program.mutable_variability() = loaded.spec.variability();
  } else {
    program.clear_variability();
    // MoE routing draws from the variability seed even on an ideal cluster
    // (docs/moe.md#load-imbalance): keep the seed, and nothing else.
    if (variability::moe_imbalance_on(program)) program.mutable_variability()->set_seed(loaded.spec.variability().seed());
  }
}

std::string file_stem_for(const std::string& scenario_name, const std::string& input_path) {
  std::string name = scenario_name;
  if (name.empty()) {
    name = std::filesystem::path(input_path).stem().string();
  }
  for (char& c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                    c == '_' || c == '.';
    if (!ok) c = '_';
  }
  if (name.empty() || name.front() == '.') name = "lacuna" + name;
  return name;
}

}  // namespace lacuna::run
