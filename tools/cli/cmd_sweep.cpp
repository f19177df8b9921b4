// `lacuna sweep SCENARIO --set FIELD=V1,V2,… [--set …] [--zip]`: a grid of
// what-ifs over any scenario field, each point run exactly as `lacuna
// simulate SCENARIO --set …` would, spread over threads (-j) and, under
// mpirun or srun, MPI processes; a table, CSV, JSON and line plots built on
// the root from the merged points (docs/sweep.md). The work is in
// sim/sweep/; this file parses flags, checks outputs, shows progress and
// writes.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "sim/core/atomic_file.h"
#include "sim/core/error.h"
#include "sim/parallel/batch_progress.h"
#include "sim/parallel/processes.h"
#include "sim/parallel/work_split.h"
#include "sim/sweep/sweep_grid.h"
#include "sim/sweep/sweep_outputs.h"
#include "sim/sweep/sweep_run.h"
#include "tools/cli/calibration_option.h"
#include "tools/cli/commands.h"
#include "tools/cli/network_option.h"
#include "tools/cli/output_checks.h"
#include "tools/cli/scale_down_option.h"

namespace lacuna::cli {
namespace {

struct SweepOptions {
  std::string scenario;
  std::vector<std::string> sets;
  bool zip = false;
  sweep::SweepSettings settings;  // all but `scenario`
  int jobs = 0;                   // 0: one per hardware thread
  std::string csv, json, svg;
  std::vector<std::string> metrics;
  bool summary_only = false;
  bool resume = false;  // --resume: reuse the journal's points
};

// The outputs, opened on the root before any point runs (an unwritable path
// fails in seconds), each renamed into place only after every point ran.
struct Outputs {
  std::optional<AtomicFile> csv, json, svg;
};

// Runs `check` on the root and makes every process agree on its outcome: a
// failure there is thrown on every process (the others would otherwise go on
// into the work split and wait for the root forever).
template <class F>
void on_root_for_all(const parallel::World& world, F&& check) {
  std::string failure;
  if (world.root()) {
    try {
      check();
    } catch (const Error& e) {
      if (world.size == 1) throw;
      failure = e.raw();  // its option references spelled where it is printed
    }
  }
  failure = parallel::broadcast_from_root(world, failure);
  if (!failure.empty()) throw Error(failure);
}

std::string best_text(const sweep::Grid& grid, size_t point, double mfu) {
  return fmt::format("point {}: MFU {:.2f} % ({})", point + 1, mfu * 100, grid.describe(point));
}

int run_sweep(const SweepOptions& o, const parallel::World& world) {
  sweep::SweepSettings settings = o.settings;
  settings.scenario = o.scenario;
  const sweep::Grid grid = sweep::make_grid(o.sets, o.zip);
  const std::vector<std::string> metrics = o.metrics.empty() ? sweep::kDefaultPlotMetrics : o.metrics;
  sweep::check_metric_names(metrics, settings.samples > 0);

  // Finished points are logged beside the first of the CSV and the JSON, so
  // that an interrupted sweep can be resumed (--resume); the journal is
  // removed once the outputs are written. Without either there is none.
  settings.journal = !o.csv.empty() ? o.csv + ".journal" : !o.json.empty() ? o.json + ".journal" : std::string();
  settings.resume = o.resume;
  if (o.resume && settings.journal.empty())
    throw Error(SourceLocation{{}, 0, 0, "--resume"}, "--resume reads the journal beside --csv or --json, and neither is given",
                "give the --csv or --json FILE of the interrupted sweep (its journal is FILE.journal)");
  Outputs out;
  on_root_for_all(world, [&] {
    check_outputs({{"--csv", o.csv}, {"--json", o.json}, {"--svg", o.svg}, {"the sweep's journal", settings.journal}},
                  {{"SCENARIO", o.scenario}, {"--calibration", settings.calibration.profile}});
    if (!settings.journal.empty()) check_journal_path(sweep::kSweepJournal, settings.journal);
    if (!o.csv.empty()) out.csv.emplace(o.csv);
    if (!o.json.empty()) out.json.emplace(o.json);
    if (!o.svg.empty()) out.svg.emplace(o.svg);
  });
  // Every point checked before any runs; each process checks the same
  // deterministic inputs, so all agree.
  const sweep::ValidatedSweep validated = sweep::validate_sweep(grid, settings);

  const int jobs = o.jobs > 0 ? o.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // Progress on the root's terminal only: the points this process owns.
  std::optional<parallel::BatchProgress> progress;
  double best_mfu = -1;
  std::string best;
  size_t owned = 0;
  if (world.root() && parallel::BatchProgress::is_terminal(stderr)) {
    const std::vector<int> owner = parallel::assign_items(grid.size(), world.size, validated.costs);
    owned = static_cast<size_t>(std::count(owner.begin(), owner.end(), 0));
    progress.emplace(stderr, "points", owned);
  }
  const parallel::ItemDone done = [&](size_t finished, size_t, size_t index, const std::string& record) {
    if (!progress) return;
    const report::RunMetrics m = report::metrics_from_record(record);
    if (m.fits() && m.mfu > best_mfu) {
      best_mfu = m.mfu;
      best = best_text(grid, index, m.mfu);
    }
    progress->update(finished, best);
  };
  std::vector<report::RunMetrics> points;
  size_t resumed = 0;
  try {
    // What the points will cost, once compiled and before the first runs:
    // on the terminal, above the progress bar.
    const sweep::SweepEstimated estimated = [&](const run::BatchEstimate& e) {
      if (!progress) return;
      progress->finish();
      fmt::print(stderr, "estimate: {}\n", run::describe_batch(e, "points to run"));
      progress.emplace(stderr, "points", owned);  // its rate from the first run on
    };
    points = sweep::run_sweep(world, grid, settings, jobs, validated.costs, done, &resumed, estimated);
  } catch (...) {
    if (progress) progress->finish();
    throw;
  }
  if (progress) progress->finish();
  if (!world.root()) return 0;  // the root prints and writes

  const sweep::SweepResult result{validated.scenario_name, grid, settings, std::move(points)};
  if (out.csv) out.csv->write(sweep::sweep_csv(result));
  if (out.json) out.json->write(sweep::sweep_json(result));
  if (out.svg) out.svg->write(sweep::sweep_svg(result, metrics));
  if (out.csv) out.csv->commit();
  if (out.json) out.json->commit();
  if (out.svg) out.svg->commit();
  for (const std::string& j : journal_paths(settings.journal, world.size)) {
    std::error_code ec;
    std::filesystem::remove(j, ec);
  }

  if (o.summary_only) {
    fmt::print("{}", sweep::sweep_json(result));
    return 0;
  }
  fmt::print("{}", sweep::sweep_table(result));
  if (resumed > 0) fmt::print("({} of {} points taken from the journal of an interrupted run)\n", resumed, grid.size());
  if (out.csv || out.json || out.svg) fmt::print("\n");
  if (out.csv) fmt::print("  csv    {}\n", o.csv);
  if (out.json) fmt::print("  json   {}\n", o.json);
  if (out.svg)
    fmt::print("  svg    {}  ({} against {})\n", o.svg, fmt::join(metrics, ", "),
               grid.axes()[sweep::plot_axis(grid)].field);
  return 0;
}

}  // namespace

void add_sweep_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<SweepOptions>();
  CLI::App* sub = app.add_subcommand(
      "sweep", "Simulate a grid of what-ifs over scenario fields: iteration time, MFU and bubbles per point");
  sub->add_option("SCENARIO", o->scenario, "scenario (.pbtxt, .textproto, .json)")->required();
  sub->add_option("--set", o->sets,
                  "a field and the values to sweep it over, e.g. --set cluster.num_nodes=32,64,128 (repeatable; "
                  "values split at top-level commas; a list value of a repeated field in brackets, [a,b])")
      ->type_name("FIELD=V1,V2,…")
      ->expected(1)
      ->take_all()
      ->required();
  sub->add_flag("--zip", o->zip,
                "advance the --set lists together (equal lengths) instead of taking every combination");
  sub->add_flag("--fold", o->settings.fold, "simulate one representative per class of identical ranks");
  add_network_option(sub, o->settings.network);
  add_calibration_options(sub, o->settings.calibration);
  add_scale_down_option(sub, o->settings.scale_down);
  sub->add_option("--samples", o->settings.samples,
                  "Monte Carlo per point: K runs, sample i with seed S + i; adds mean, p50, p90, p99 of iteration "
                  "time and MFU (docs/metrics.md#monte-carlo)")
      ->check(CLI::Range(1, 1000000));
  sub->add_option("--seed", o->settings.seed, "seed of the variability's RNG (default: the scenario's, else 0)")
      ->type_name("S")
      ->check(CLI::Range(int64_t{0}, INT64_MAX));
  sub->add_flag("--ideal", o->settings.ideal,
                "the ideal cluster: every source of variability off (docs/variability.md)");
  sub->add_option("--max-memory-gb", o->settings.max_memory_gb,
                  "refuse a sweep whose points in flight at once would need more than this many GB, checked once "
                  "every point is compiled and before the first runs (default: 80 % of this machine's memory; 0: no "
                  "limit; docs/performance.md#batch-estimate)")
      ->check(CLI::Range(0.0, 1e9));
  sub->add_option("-j,--jobs", o->jobs, "points simulated at once in each process (default: one per hardware thread)")
      ->check(CLI::Range(1, 4096));
  sub->add_option("--csv", o->csv, "write every point's fields and metrics as CSV to FILE")->check(output_file());
  sub->add_option("--json", o->json, "write the sweep (settings, points, metrics) as JSON to FILE")
      ->check(output_file());
  sub->add_option("--svg", o->svg, "write line plots of the --metric values against the first swept field to FILE")
      ->check(output_file());
  sub->add_option("--metric", o->metrics,
                  "a metric to plot in --svg, by its CSV name (repeatable; default: mfu and iteration_s)")
      ->expected(1)
      ->take_all();
  sub->add_flag("--summary-only", o->summary_only, "print only the JSON document to stdout (no table)");
  sub->add_flag("--resume", o->resume,
                "reuse the points an interrupted run of the same sweep logged beside its --csv (or --json)");
  sub->callback([o, &action] {
    action = [o] {
      const parallel::World world = parallel::world();
      try {
        return run_sweep(*o, world);
      } catch (const Error&) {
        // Every process fails alike; one message (the root's) is enough.
        if (!world.root()) return 2;
        throw;
      }
    };
  });
}

}  // namespace lacuna::cli
