#include "sim/sweep/sweep_run.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/core/input_file.h"
#include "sim/engine/simulator.h"
#include "sim/run/program_input.h"
#include "sim/run/simulation_run.h"
#include "sim/scenario/parse.h"
#include "sim/scenario/scenario.h"

namespace lacuna::sweep {
namespace {

bool is_json(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".json";
}

// The scenario as written, before presets and validation: what --set edits.
scenario::Scenario raw_scenario(const std::string& path) {
  const std::string text = read_input_file(path, kScenarioInput);
  scenario::SourceMap locations;
  locations.set_file(path);
  scenario::check_utf8(text, locations);
  return is_json(path) ? scenario::parse_json_format(text, locations) : scenario::parse_text_format(text, locations);
}

// The point's label before an error's own text; a deadlock stays a deadlock
// (the CLI's exit status 3), with its blocked ops.
[[noreturn]] void rethrow_for_point(const std::string& label) {
  try {
    throw;
  } catch (const engine::DeadlockError& e) {
    throw engine::DeadlockError(label + ": " + e.what(), e.blocked());
  } catch (const Error& e) {
    throw Error(label + ": " + e.raw());
  }
}

}  // namespace

scenario::ScenarioEdits point_edits(const Grid& grid, size_t point, const SweepSettings& s) {
  scenario::ScenarioEdits edits;
  edits.set = grid.assignments(point);
  edits.ideal = s.ideal;
  edits.seed = s.seed;
  return edits;
}

std::string point_label(const Grid& grid, size_t point) {
  return fmt::format("sweep point {} of {} ({})", point + 1, grid.size(), grid.describe(point));
}

ValidatedSweep validate_sweep(const Grid& grid, const SweepSettings& s) {
  if (run::is_program_file(s.scenario)) {
    throw Error(SourceLocation{s.scenario, 0, 0, {}}, "lacuna sweep needs a scenario, not a compiled program",
                "pass the scenario file (.pbtxt, .textproto, .json): each point edits it with ‹set› and compiles it");
  }
  check_fields(grid, raw_scenario(s.scenario));
  ValidatedSweep out;
  out.costs.resize(grid.size());
  for (size_t p = 0; p < grid.size(); ++p) {
    scenario::LoadedScenario loaded;
    try {
      loaded = scenario::load_scenario(s.scenario, s.scale_down, point_edits(grid, p, s));
    } catch (const Error&) {
      rethrow_for_point(point_label(grid, p));
    }
    if (p == 0) {
      out.scenario_name = loaded.spec.name();
      // The profile read and its device checked once, before any run.
      if (s.calibration.enabled()) {
        (void)run::make_cost_model(s.calibration, loaded.spec.cluster(), loaded.spec.training().precision(),
                                   s.scenario);
      }
    }
    out.multimodal |= loaded.spec.model().encoders_size() > 0;
    out.costs[p] = static_cast<double>(scenario::num_gpus(loaded.spec)) *
                   static_cast<double>(std::max<int64_t>(1, scenario::num_microbatches(loaded.spec)));
  }
  return out;
}

std::string run_point(const Grid& grid, size_t point, const SweepSettings& s) {
  try {
    const run::SimulationInput input =
        run::load_simulation_input(s.scenario, s.calibration, s.scale_down, point_edits(grid, point, s));
    // As simulate: a kernel class the profile lacks fails before the run.
    if (const auto* calibrated = input.calibrated()) (void)run::coverage_section(*calibrated, input.program);
    // `lacuna simulate`'s settings (tools/cli/cmd_simulate.cpp), one
    // iteration; the samples of one point on one thread, since the sweep
    // already runs a point per thread (results do not depend on it).
    run::SimulationRun simulation(input.program, *input.cost,
                                  {.fold = s.fold,
                                   .compute_slots = 0,
                                   .network = s.network,
                                   .sampling = {.iterations = 1, .samples = s.samples, .seed = 0, .jobs = 1},
                                   .seed_override = s.seed,
                                   .progress = nullptr});
    return report::metrics_record(report::run_metrics(simulation.run()));
  } catch (const Error&) {
    rethrow_for_point(point_label(grid, point));
  }
}

std::vector<report::RunMetrics> run_sweep(const parallel::World& world, const Grid& grid, const SweepSettings& s,
                                          int jobs, const std::vector<double>& costs, const parallel::ItemDone& done) {
  const std::vector<std::string> records = parallel::map_items(
      world, grid.size(), jobs, [&](size_t p) { return run_point(grid, p, s); }, costs, done);
  std::vector<report::RunMetrics> out;
  out.reserve(records.size());
  for (const std::string& r : records) out.push_back(report::metrics_from_record(r));
  return out;
}

}  // namespace lacuna::sweep
