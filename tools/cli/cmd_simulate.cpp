// `lacuna simulate INPUT`: one iteration (or --iterations N), the summary
// table, and (after the run succeeded) the trace, the SVG and optionally the
// JSON summary and the CSV row (--csv, docs/outputs.md#csv); --samples K adds
// Monte Carlo statistics (sampling_option.h).
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "sim/core/atomic_file.h"
#include "sim/core/error.h"
#include "sim/core/option_text.h"
#include "sim/engine/run_estimate.h"
#include "sim/report/analyses/memory_warning.h"
#include "sim/report/analyses/run_metrics.h"
#include "sim/report/analyses/summary.h"
#include "sim/report/formats/terminal_report.h"
#include "sim/run/program_input.h"
#include "sim/run/run_progress.h"
#include "sim/run/simulation_run.h"
#include "tools/cli/calibration_option.h"
#include "tools/cli/commands.h"
#include "tools/cli/critical_path_option.h"
#include "tools/cli/network_option.h"
#include "tools/cli/output_checks.h"
#include "tools/cli/run_outputs.h"
#include "tools/cli/sampling_option.h"
#include "tools/cli/scale_down_option.h"
#include "tools/cli/variability_option.h"

namespace lacuna::cli {

namespace {

struct SimulateOptions {
  std::string input;
  bool fold = false;
  int32_t compute_slots = 0;
  OutputOptions outputs;
  std::string csv;  // --csv: one row of the headline metrics
  NetworkMode network = NetworkMode::kFlow;
  CalibrationOption calibration;
  int64_t scale_down = 1;
  bool strict_memory = false;
  CriticalPathOptions critical_path;
  SamplingOptions sampling;
  scenario::ScenarioEdits edits;  // what-ifs: --ideal --seed --straggler --slow-link --set
  double max_memory_gb = -1;       // -1: 80 % of this machine's memory; 0: no limit
};

int run_simulate(const SimulateOptions& o) {
  // The executed op graph and the straggler tallies describe one iteration
  // (docs/critical-path.md); several iterations would mix their paths.
  if (o.critical_path.any() && o.sampling.iterations > 1) {
    throw Error(SourceLocation{"--iterations", 0, 0, {}},
                "--critical-path, --sensitivity, --stragglers and --heatmap analyse one iteration",
                "drop --iterations (with --samples K they analyse sample 0)");
  }
  // The cost model compiles (plans) and times the program: calibrated with
  // --calibration, else the lazily built analytic model.
  // Output paths before the (possibly long) load and compile.
  const std::vector<NamedPath> inputs = {{"INPUT", o.input}, {"--calibration", o.calibration.profile}};
  // Outputs beside RunOutputs' own, checked with them.
  const std::vector<NamedPath> other_outputs = {{"--heatmap", o.critical_path.heatmap}, {"--csv", o.csv}};
  {
    std::vector<NamedPath> given = explicit_outputs(o.outputs);
    given.insert(given.end(), other_outputs.begin(), other_outputs.end());
    check_outputs(given, inputs);
  }
  const run::SimulationInput input = run::load_simulation_input(o.input, o.calibration, o.scale_down, o.edits);
  const ir::Program& program = input.program;
  const cost::CostModel& cost = *input.cost;
  // Coverage walks the program's kernels before the run: a kernel class the
  // profile lacks fails here, before any output file is opened.
  std::optional<report::CalibrationCoverage> coverage;
  if (const auto* calibrated = input.calibrated()) coverage = run::coverage_section(*calibrated, program);
  const std::string stem = run::file_stem_for(program.info().scenario_name(), o.input);
  RunOutputs outputs(program, o.outputs, stem, "", trace::PREDICTION, true, other_outputs, inputs);
  CriticalPathOutputs critical(program, o.critical_path);
  std::optional<AtomicFile> csv_file;  // opened now: an unwritable path fails before the run
  if (!o.csv.empty()) csv_file.emplace(o.csv);

  // A progress line on a terminal, for runs past two seconds (never in a log
  // or a pipe: stdout's table stays clean either way).
  std::optional<run::TerminalProgress> progress;
  if (run::TerminalProgress::is_terminal(stderr)) progress.emplace(stderr);
  // Variability, network, accounting and samples: sim/run/simulation_run.h.
  run::SimulationRun simulation(program, cost,
                                {.fold = o.fold,
                                 .compute_slots = o.compute_slots,
                                 .network = o.network,
                                 .sampling = o.sampling,
                                 .seed_override = o.edits.seed,
                                 .progress = progress ? &*progress : nullptr});
  // Before the run: its events and memory, and a refusal when it cannot fit
  // (docs/performance.md#estimate) instead of dying of bad_alloc later.
  const run::RunEstimate estimate = simulation.estimate();
  run::check_run_memory(estimate, run::resident_bytes(), run::memory_limit_from_gb(o.max_memory_gb), "--max-memory-gb");
  for (engine::Observer* observer : critical.observers()) simulation.add_observer(observer);  // before the trace
  critical.attach_trace(outputs.trace());
  for (engine::Observer* observer : outputs.observers()) simulation.add_observer(observer);
  if (outputs.trace() != nullptr) simulation.add_link_observer(outputs.trace()->link_observer());

  report::Summary summary = simulation.run();
  if (progress) progress->finish();
  summary.calibration = std::move(coverage);
  if (program.info().has_fp8()) summary.fp8 = report::fp8_breakdown(program, cost);  // docs/fp8.md#breakdown
  critical.finish(summary, report::select_ranks(outputs.spec(), program), cost,
                  [&](const cost::CostModel& scaled) { return simulation.resimulate(scaled); });
  // A rank over HBM is not a valid result (docs/memory-model.md#feasibility):
  // the warning goes before and after the table and to stderr; with
  // --strict-memory the run fails and, like every failed run, writes no file.
  const std::string warning = report::memory_warning(summary, cli_option);
  const bool rejected = o.strict_memory && !warning.empty();
  if (!rejected) {
    outputs.commit(summary);
    critical.commit();
    if (csv_file) {
      csv_file->write(report::summary_csv(summary));
      csv_file->commit();
    }
  }

  report::RunStats stats;
  stats.wall_seconds = simulation.wall_seconds();
  stats.events = simulation.events();
  stats.estimate = run::describe_estimate(estimate);
  // fold_tip applies the time rule too; checking it here first spares
  // planning the fold for every short run.
  if (!o.fold && !summary.variability && o.sampling.samples == 0 && o.compute_slots == 0 &&
      stats.wall_seconds > report::kFoldTipSeconds) {
    engine::SimulationOptions folded;
    folded.fold = true;
    folded.iterations = o.sampling.iterations;
    const engine::EngineEstimate f = engine::estimate_engine(program, folded);
    stats.tip = spell_options(report::fold_tip(stats.wall_seconds, program.ranks_size(),
                                               static_cast<int32_t>(f.simulated_ranks),
                                               o.network == run::NetworkMode::kFlow, f.events, stats.events),
                              cli_option);
  }
  if (!warning.empty()) fmt::print(stderr, "{}", warning);
  fmt::print("{}{}{}", warning.empty() ? "" : warning + "\n", report::format_summary(summary, stats),
             warning.empty() ? "" : "\n" + warning);
  if (rejected) {
    std::fflush(stdout);
    fmt::print(stderr, "lacuna: error: --strict-memory: {} of {} ranks exceed the HBM capacity; no output written\n",
               summary.over_capacity_ranks, summary.num_gpus);
    return report::kExitOverCapacity;
  }
  std::string files = outputs.describe();
  if (csv_file) files += fmt::format("{}  csv    {}\n", files.empty() ? "\n" : "", o.csv);
  fmt::print("{}{}", files, critical.describe(files.empty()));
  return 0;
}

}  // namespace

void add_simulate_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<SimulateOptions>();
  CLI::App* sub = app.add_subcommand("simulate", "Simulate training iterations and report time, MFU and bubbles");
  sub->add_option("INPUT", o->input, "scenario (.pbtxt, .textproto, .json) or program from `lacuna compile` (.pb)")
      ->required();
  sub->add_flag("--fold", o->fold, "simulate one representative per class of identical ranks");
  sub->add_option("--compute-slots", o->compute_slots,
                  "at most N compute kernels at once over all ranks (0: no limit): the ranks share one host's N "
                  "cores, as in `lacuna execute --backend cpu` (docs/executor.md#cpu-contention)")
      ->check(CLI::Range(0, 1 << 20));
  add_network_option(sub, o->network);
  add_calibration_options(sub, o->calibration);
  add_scale_down_option(sub, o->scale_down);
  sub->add_flag("--strict-memory", o->strict_memory,
                "fail (exit 4, no output files) when any rank's peak memory exceeds the GPU's HBM capacity");
  sub->add_option("--max-memory-gb", o->max_memory_gb,
                  "refuse a run whose estimated memory exceeds this many GB (default: 80 % of this machine's "
                  "memory; 0: no limit; docs/performance.md#estimate)")
      ->check(CLI::Range(0.0, 1e9));
  add_sampling_options(sub, o->sampling);
  add_output_options(sub, o->outputs, "");
  sub->add_option("--csv", o->csv,
                  "write the headline metrics and bubble categories (and with --samples their statistics) as one CSV "
                  "row to FILE (docs/outputs.md#csv)")
      ->check(output_file());
  add_critical_path_options(sub, o->critical_path);
  add_variability_options(sub, o->edits);
  sub->callback([o, &action] { action = [o] { return run_simulate(*o); }; });
}

}  // namespace lacuna::cli
