// `lacuna search SCENARIO`: the best parallel plan (and, for a multimodal
// scenario, encoder placement) for a model on a cluster (docs/search.md).
// The enumeration, pruning, screen and simulation live in sim/search/; this
// file parses the flags, shows progress, prints and writes.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "sim/core/atomic_file.h"
#include "sim/core/error.h"
#include "sim/core/output_path.h"
#include "sim/parallel/batch_progress.h"
#include "sim/parallel/processes.h"
#include "sim/run/program_input.h"
#include "sim/search/search_outputs.h"
#include "sim/search/search_run.h"
#include "tools/cli/commands.h"
#include "tools/cli/calibration_option.h"
#include "tools/cli/network_option.h"
#include "sim/search/search_journal.h"
#include "tools/cli/output_checks.h"

namespace lacuna::cli {
namespace {

struct SearchCliOptions {
  search::SearchOptions search;
  std::string gpus;
  std::vector<std::string> set;
  size_t top = 20;
  std::string csv, json, svg;
  std::string out_dir = "lacuna-out";
  bool summary_only = false;
};

void remove_journals(const std::string& journal, int processes) {
  std::error_code ec;
  for (const std::string& j : journal_paths(journal, processes)) std::filesystem::remove(j, ec);
}

int run_search_command(SearchCliOptions o) {
  const parallel::World world = parallel::world();
  if (!o.gpus.empty()) o.search.gpus = search::parse_gpu_range(o.gpus);
  o.search.edits.set = o.set;
  if (o.search.scenario.size() > 3 && o.search.scenario.substr(o.search.scenario.size() - 3) == ".pb") {
    throw Error(SourceLocation{o.search.scenario, 0, 0, {}}, "lacuna search needs a scenario, not a compiled program",
                "pass the scenario file (.pbtxt, .json): search rewrites its parallel plan");
  }
  // Default outputs, like simulate's: the CSV and the SVG under --out-dir
  // (none with --summary-only, which is for scripts).
  std::string stem;
  {
    const scenario::LoadedScenario probe = scenario::load_scenario(o.search.scenario, 1, o.search.edits);
    stem = run::file_stem_for(probe.spec.name(), o.search.scenario);
  }
  const bool defaults = !o.summary_only && (o.csv.empty() || o.svg.empty());
  if (defaults && o.csv.empty()) o.csv = (std::filesystem::path(o.out_dir) / (stem + ".search.csv")).string();
  if (defaults && o.svg.empty()) o.svg = (std::filesystem::path(o.out_dir) / (stem + ".search.svg")).string();
  if (defaults) {
    // Every process: the journals of the others go there too.
    std::error_code ec;
    std::filesystem::create_directories(o.out_dir, ec);
    if (ec) throw Error(SourceLocation{o.out_dir, 0, 0, "--out-dir"}, "cannot create the output directory: " + ec.message());
  }
  // Finished simulations are logged beside the CSV, so that an interrupted
  // search can be resumed (--resume); removed once the outputs are written.
  // Without a CSV (--summary-only, which writes no files) there is none.
  if (!o.csv.empty()) o.search.journal = o.csv + ".journal";
  if (o.search.resume && o.search.journal.empty())
    throw Error(SourceLocation{{}, 0, 0, "--resume"},
                "--resume reads the journal beside the CSV, and --summary-only writes no CSV",
                "give --csv FILE (the journal is FILE.journal), or drop --resume");
  check_outputs({{"--csv", o.csv}, {"--json", o.json}, {"--svg", o.svg}, {"--csv's journal", o.search.journal}},
                {{"SCENARIO", o.search.scenario}, {"--calibration", o.search.calibration.profile}});
  if (!o.search.journal.empty()) search::check_journal_path(o.search.journal);

  std::unique_ptr<parallel::BatchProgress> bar;
  std::string stage;
  const bool terminal = world.root() && !o.summary_only && parallel::BatchProgress::is_terminal(stderr);
  auto progress = [&](const char* now, size_t done, size_t total, double best) {
    if (!terminal) return;
    if (stage != now) {
      if (bar) bar->finish();
      stage = now;
      const char* unit = stage == "screen" ? "plan chunks screened" : stage == "compile" ? "plans compiled" : "plans simulated";
      bar = std::make_unique<parallel::BatchProgress>(stderr, unit, total);
    }
    bar->update(done, best > 0 ? fmt::format("best {:.0f} tokens/s", best) : std::string());
  };
  // What the simulate stage will cost, before it starts: on the terminal,
  // between the compile and simulate bars.
  auto estimated = [&](const run::BatchEstimate& e) {
    if (!terminal) return;
    if (bar) bar->finish();
    bar.reset();
    stage.clear();
    fmt::print(stderr, "estimate: {}\n", run::describe_batch(e, "plans to simulate"));
  };
  const search::SearchResult result = search::run_search(o.search, world, progress, estimated);
  if (bar) bar->finish();
  if (!world.root()) return 0;

  if (o.summary_only) {
    fmt::print("{}", search::search_json(result, o.top, true));
  } else {
    fmt::print("{}", search::format_search(result, o.top));
    const double screen_rate = result.timings.screen_s > 0 ? static_cast<double>(result.candidates.size()) / result.timings.screen_s : 0;
    size_t resumed = 0;
    for (const search::Candidate& c : result.candidates) resumed += c.simulated && c.simulated->resumed;
    fmt::print("\nTime: enumerate {:.2f} s, screen {:.2f} s ({} plans, {:.0f} plans/s on {} process{} × {} thread{}), "
               "compile {:.2f} s, simulate {:.2f} s{}{}\n",
               result.timings.enumerate_s, result.timings.screen_s, result.candidates.size(), screen_rate,
               result.processes, result.processes == 1 ? "" : "es", result.threads, result.threads == 1 ? "" : "s",
               result.timings.compile_s, result.timings.simulate_s,
               result.estimate ? fmt::format(" (estimated {})", run::describe_batch(*result.estimate, "plans"))
                               : std::string(),
               resumed > 0 ? fmt::format(" ({} simulations taken from the journal of an interrupted run)", resumed)
                           : std::string());
  }
  if (!o.csv.empty()) write_file_atomically(o.csv, search::search_csv(result));
  if (!o.json.empty()) write_file_atomically(o.json, search::search_json(result, o.top, false));
  if (!o.svg.empty()) write_file_atomically(o.svg, search::search_svg(result));
  remove_journals(o.search.journal, result.processes);
  if (!o.summary_only) {
    for (const auto& [flag, path] : {std::pair{"--csv", o.csv}, {"--json", o.json}, {"--svg", o.svg}})
      if (!path.empty()) fmt::print("wrote {} ({})\n", path, flag);
  }
  return 0;
}

}  // namespace

void add_search_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<SearchCliOptions>();
  CLI::App* sub = app.add_subcommand(
      "search",
      "The best parallel plans for a scenario: enumerate, prune, screen, then simulate the best K (docs/search.md)");
  sub->add_option("SCENARIO", o->search.scenario, "scenario (.pbtxt, .json)")->required();
  sub->add_option("--gpus", o->gpus, "GPU count or range LO..HI to search over (default: the scenario's)");
  sub->add_option("--max-memory-gb", o->search.max_memory_gb, "memory limit per GPU in GB (default: the GPU's HBM)")
      ->check(CLI::Range(0.0, 1e6));
  sub->add_option("--max-host-memory-gb", o->search.max_host_memory_gb,
                  "refuse a search whose simulations in flight at once would need more than this many GB of this "
                  "machine's memory, checked before the first (default: 80 % of it; 0: no limit; "
                  "docs/performance.md#batch-estimate)")
      ->check(CLI::Range(0.0, 1e9));
  sub->add_option("--fix", o->search.fixes,
                  "fix a dimension: FIELD=VALUE[,VALUE...], e.g. parallel.tp=8 (docs/search.md lists the fields)");
  sub->add_option("--set", o->set, "edit the base scenario first: FIELD=VALUE (as simulate --set)");
  // Each simulated plan is a compile and a folded simulation (0.01 to 0.1 s
  // and more): 10,000 bound a search to tens of minutes per core, and an
  // interrupted one resumes (--resume).
  sub->add_option("--simulate", o->search.simulate_top,
                  "K: the best plans by the screen to compile and simulate (at most 10000)")
      ->check(CLI::Range(0, 10000))
      ->capture_default_str();
  sub->add_option("--top", o->top, "rows of the table and of the JSON's top list")->capture_default_str();
  add_network_option(sub, o->search.network);
  add_calibration_options(sub, o->search.calibration);
  sub->add_option("-j,--jobs", o->search.jobs, "threads per process (default: one per hardware thread)")
      ->check(CLI::Range(0, 1024));
  sub->add_option("--csv", o->csv, "every candidate with its fate (default DIR/<scenario>.search.csv)")->check(output_file());
  sub->add_option("--json", o->json, "the summary and every candidate as JSON")->check(output_file());
  sub->add_option("--svg", o->svg, "the Pareto fronts (default DIR/<scenario>.search.svg)")->check(output_file());
  sub->add_option("--out-dir", o->out_dir, "directory for the default outputs (created if missing)")->capture_default_str();
  sub->add_flag("--summary-only", o->summary_only, "print only a JSON summary (no table, no default files)");
  sub->add_flag("--resume", o->search.resume,
                "reuse the simulations an interrupted run of the same search logged beside its CSV");
  sub->callback([o, &action] { action = [o] { return run_search_command(*o); }; });
}

}  // namespace lacuna::cli
