#include "sim/sweep/sweep_run.h"

#include <algorithm>
#include <memory>
#include <cctype>
#include <filesystem>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/core/input_file.h"
#include "sim/core/option_text.h"
#include "sim/engine/simulator.h"
#include "sim/run/batch_estimate.h"
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
        try {
          (void)run::make_cost_model(s.calibration, loaded.spec.cluster(), loaded.spec.training().precision(),
                                     s.scenario);
        } catch (const Error& e) {
          // A problem of the profile's own names the option it came in by.
          if (e.where().file != s.calibration.profile || !e.where().field.empty()) throw;
          throw Error(SourceLocation{e.where().file, e.where().line, e.where().column, option_ref("calibration")},
                      e.problem(), e.fix());
        }
      }
    }
    out.multimodal |= loaded.spec.model().encoders_size() > 0;
    out.costs[p] = static_cast<double>(scenario::num_gpus(loaded.spec)) *
                   static_cast<double>(std::max<int64_t>(1, scenario::num_microbatches(loaded.spec)));
  }
  return out;
}

namespace {

// A point loaded and compiled for its run: `lacuna simulate`'s input.
std::unique_ptr<run::SimulationInput> prepare_point(const Grid& grid, size_t point, const SweepSettings& s) {
  auto input = std::make_unique<run::SimulationInput>(
      run::load_simulation_input(s.scenario, s.calibration, s.scale_down, point_edits(grid, point, s)));
  // As simulate: a kernel class the profile lacks fails before the run.
  if (const auto* calibrated = input->calibrated()) (void)run::coverage_section(*calibrated, input->program);
  return input;
}

// `lacuna simulate`'s settings (tools/cli/cmd_simulate.cpp), one iteration;
// the samples of one point on one thread, since the sweep already runs a
// point per thread (results do not depend on it).
run::RunSettings point_run_settings(const SweepSettings& s) {
  return {.fold = s.fold,
          .compute_slots = 0,
          .network = s.network,
          .sampling = {.iterations = 1, .samples = s.samples, .seed = 0, .jobs = 1},
          .seed_override = s.seed,
          .progress = nullptr};
}

// Compiles one point and estimates its run, keeping the compile for the run
// when it fits the slots' budget. Errors start with point_label.
std::string estimate_point(const Grid& grid, size_t point, const SweepSettings& s, size_t slot,
                           run::PreparedSlots<run::SimulationInput>& slots) {
  try {
    return run::encode_item_estimate(
        run::estimate_item([&] { return prepare_point(grid, point, s); }, point_run_settings(s), slot, slots));
  } catch (const Error&) {
    rethrow_for_point(point_label(grid, point));
  }
}

std::string run_prepared_point(const Grid& grid, size_t point, const SweepSettings& s,
                               std::unique_ptr<run::SimulationInput> kept) {
  try {
    const std::unique_ptr<run::SimulationInput> input = kept ? std::move(kept) : prepare_point(grid, point, s);
    run::SimulationRun simulation(input->program, *input->cost, point_run_settings(s));
    return report::metrics_record(report::run_metrics(simulation.run()));
  } catch (const Error&) {
    rethrow_for_point(point_label(grid, point));
  }
}

}  // namespace

std::string run_point(const Grid& grid, size_t point, const SweepSettings& s) {
  return run_prepared_point(grid, point, s, nullptr);
}

const JournalKind kSweepJournal{
    "lacuna-sweep-journal",
    "v1",
    "sweep journal",
    "point",
    "sweep",
    InputKind{"sweep journal", 64 * kMiB, "remove it, or rerun without ‹resume› (the sweep starts afresh)"},
    "give ‹csv› or ‹json› another path (the journal is the first of them + \".journal\")"};

uint64_t sweep_hash(const Grid& grid, const SweepSettings& s) {
  uint64_t h = fnv1a64(read_input_file(s.scenario, kScenarioInput));
  for (size_t p = 0; p < grid.size(); ++p) h = fnv1a64("\n" + grid.describe(p), h);
  h = fnv1a64(fmt::format("\nscale_down {} fold {} network {} samples {} seed {} ideal {}", s.scale_down, s.fold,
                          s.network == run::NetworkMode::kFlow ? "flow" : "analytic", s.samples, s.seed, s.ideal),
              h);
  // A profile's measurements, not its path, make the points what they are.
  if (s.calibration.enabled()) h = fnv1a64("\n" + read_input_file(s.calibration.profile, kProfileInput), h);
  return h;
}

void check_sweep_record(const std::string& record, const SourceLocation& where) {
  report::RunMetrics m;
  try {
    m = report::metrics_from_record(record);
  } catch (const std::exception&) {
    // The record is the journal's text, not lacuna's own: a user's problem.
    throw Error(where, "the record is not a point's metrics as lacuna writes them", std::string(kSweepJournal.input.fix));
  }
  if (!(m.mfu > 0 && m.mfu <= 1) || m.num_gpus < 1 || m.iteration_time_ns <= 0)
    throw Error(where,
                fmt::format("the record holds figures no run gives (MFU {}, {} GPUs, iteration {} ns)", m.mfu,
                            m.num_gpus, m.iteration_time_ns),
                std::string(kSweepJournal.input.fix));
}

std::vector<report::RunMetrics> run_sweep(const parallel::World& world, const Grid& grid, const SweepSettings& s,
                                          int jobs, const std::vector<double>& costs, const parallel::ItemDone& done,
                                          size_t* resumed, const SweepEstimated& on_estimate) {
  // Each process logs the points it finishes in its own journal; a resumed
  // sweep reads them all, so every process skips the same points.
  const std::vector<std::string> journals = journal_paths(s.journal, world.size);
  const uint64_t hash = journals.empty() ? 0 : sweep_hash(grid, s);
  std::map<size_t, std::string> own;
  std::map<size_t, std::string> journaled =
      s.resume ? read_journals(kSweepJournal, journals, hash, grid.size(), check_sweep_record, world.rank, &own)
               : std::map<size_t, std::string>{};
  std::vector<size_t> to_run;
  std::vector<double> to_run_costs;
  for (size_t p = 0; p < grid.size(); ++p)
    if (!journaled.count(p)) {
      to_run.push_back(p);
      if (!costs.empty()) to_run_costs.push_back(costs[p]);
    }
  const parallel::ItemDone done_here = [&](size_t finished, size_t owned, size_t k, const std::string& record) {
    if (done) done(finished, owned, to_run[k], record);
  };
  // Before the first run: the points most likely to be the largest (by
  // the cost proxy) compiled and their runs estimated, the batch checked
  // against this machine's memory (docs/performance.md#batch-estimate). The
  // sampled points are kept for their runs (under MPI, a point kept on one
  // process and run on another is compiled again there).
  const Bytes limit = run::memory_limit_from_gb(s.max_memory_gb);
  std::vector<double> proxy = to_run_costs;
  if (proxy.empty()) proxy.assign(to_run.size(), 1.0);
  const std::vector<size_t> sample =
      run::estimate_sample({proxy}, to_run.size(), static_cast<size_t>(std::max(4, jobs)));
  std::vector<double> sample_costs;  // for the work split
  for (size_t k : sample) sample_costs.push_back(proxy[k]);
  run::PreparedSlots<run::SimulationInput> slots(to_run.size(), run::prepared_budget(limit));
  const std::vector<std::string> estimated = parallel::map_items(
      world, sample.size(), jobs,
      [&](size_t i) { return estimate_point(grid, to_run[sample[i]], s, sample[i], slots); }, sample_costs);
  std::string refusal;
  if (world.root() && !to_run.empty()) {
    const run::BatchEstimate batch =
        run::estimate_sampled_batch(estimated, sample, proxy, jobs, world.size, s.network, s.fold);
    try {
      run::check_batch_memory(batch, run::resident_bytes(), limit, "--max-memory-gb", "points",
                              s.fold ? "fewer points" : "fewer points, one representative per class (‹fold›)");
    } catch (const Error& e) {
      if (world.size == 1) throw;
      refusal = e.raw();
    }
    if (on_estimate) on_estimate(batch);
  }
  refusal = parallel::broadcast_from_root(world, refusal);
  if (!refusal.empty()) throw Error(refusal);
  // The journal is (re)written only once the batch is accepted: a refused
  // sweep leaves nothing behind.
  std::optional<JournalLog> log;
  if (!journals.empty()) log.emplace(kSweepJournal, journals[static_cast<size_t>(world.rank)], hash, own);

  const std::vector<std::string> fresh = parallel::map_items(
      world, to_run.size(), jobs,
      [&](size_t k) {
        std::string record = run_prepared_point(grid, to_run[k], s, slots.take(k));
        if (log) log->append(to_run[k], record);
        return record;
      },
      to_run_costs, done_here);
  if (resumed) *resumed = journaled.size();
  if (!world.root()) return {};
  for (size_t k = 0; k < to_run.size(); ++k) journaled[to_run[k]] = fresh[k];
  std::vector<report::RunMetrics> out;
  out.reserve(grid.size());
  for (size_t p = 0; p < grid.size(); ++p) out.push_back(report::metrics_from_record(journaled.at(p)));
  return out;
}

}  // namespace lacuna::sweep
