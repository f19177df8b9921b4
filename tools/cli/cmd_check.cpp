// `lacuna check SCENARIO`: load and validate, then show the scenario with the
// hardware preset resolved, so users see every value the simulator will use.
#include <memory>
#include <string>

#include <fmt/format.h>
#include <google/protobuf/text_format.h>

#include "sim/compiler/custom_schedule.h"
#include "sim/scenario/scenario.h"
#include "tools/cli/commands.h"

namespace lacuna::cli {

namespace {

struct CheckOptions {
  std::string scenario;
  std::string schedule;
};

// The scenario's pipeline schedule as actions, checked (a CUSTOM schedule's
// file, or --schedule FILE against the scenario's pipeline).
void check_schedule(const scenario::LoadedScenario& loaded, const std::string& file) {
  const bool custom = loaded.spec.schedule().kind() == scenario::CUSTOM;
  if (file.empty() && !custom) return;
  schedule::PipelineShape shape;
  const schedule::ActionSchedule actions =
      file.empty() ? compiler::scenario_actions(loaded, &shape)
                   : compiler::check_actions_file(loaded, file, "--schedule", &shape);
  size_t n = 0, ahead = 0;  // actions; recomputes run as passes of their own
  for (const auto& r : actions) {
    n += r.size();
    for (const auto& a : r)
      if (a && a->module.empty() && a->type == schedule::ActionType::kRecompute && !a->overlaps_next) ++ahead;
  }
  fmt::print("# schedule {}: ok ({} pipeline ranks, {} virtual stages{}, {} microbatches, {} actions{})\n",
             file.empty() ? compiler::actions_file_path(loaded) : file, shape.pp, shape.pp * shape.virtual_stages,
             shape.layout == schedule::StageLayout::kV               ? " in the V layout"
             : shape.layout == schedule::StageLayout::kBidirectional ? " in the bidirectional layout (two pipelines)"
                                                                     : "",
             shape.microbatches, n,
             ahead > 0 ? fmt::format("; {} recomputes run ahead of their backward as passes of their own", ahead)
                       : std::string());
}

int run_check(const CheckOptions& o) {
  const std::string& path = o.scenario;
  const scenario::LoadedScenario loaded = scenario::load_scenario(path);
  check_schedule(loaded, o.schedule);
  std::string text;
  google::protobuf::TextFormat::PrintToString(loaded.spec, &text);
  fmt::print("# {}: ok (preset resolved, validated)\n", path);
  if (!loaded.defaults.empty()) {
    fmt::print("# defaults filled (docs/scenario.md#defaults):\n");
    for (const auto& d : loaded.defaults) fmt::print("#   {} = {}  ({})\n", d.field, d.value, d.why);
  }
  fmt::print("{}", text);
  return 0;
}

}  // namespace

void add_check_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<CheckOptions>();
  CLI::App* sub = app.add_subcommand(
      "check", "Validate a scenario (and its schedule's actions) and print it with presets resolved");
  sub->add_option("SCENARIO", o->scenario, "scenario file (.pbtxt, .textproto, .json)")->required();
  sub->add_option("--schedule", o->schedule,
                  "also check FILE (actions, text form or CSV) as the scenario's pipeline schedule: every rank, "
                  "step and action that breaks an invariant is named (docs/schedules.md)");
  sub->callback([o, &action] { action = [o] { return run_check(*o); }; });
}

}  // namespace lacuna::cli
