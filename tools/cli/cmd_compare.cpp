// `lacuna compare SCENARIO`: the scenario's multimodal workload under every
// applicable placement (placement::applicable_placements), plus the LLM alone
// as the reference for "encoder compute hidden in bubbles"; a side-by-side
// table, optionally JSON and CSV (one row per placement), and one SVG with
// one rank of every placement on a common time axis (docs/compare.md).
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sim/core/atomic_file.h"
#include "sim/core/error.h"
#include "sim/engine/simulator.h"
#include "sim/placement/compile.h"
#include "sim/placement/hetero_layouts.h"
#include "sim/placement/modules.h"
#include "sim/report/bubble_accounting.h"
#include "sim/report/compare_csv.h"
#include "sim/report/compare_report.h"
#include "sim/report/format.h"
#include "sim/report/names.h"
#include "sim/report/pipeline_svg.h"
#include "sim/report/rank_spec.h"
#include "sim/report/summary.h"
#include "sim/run/program_input.h"
#include "sim/run/single_run.h"
#include "sim/scenario/edits.h"
#include "sim/scenario/scenario.h"
#include "tools/cli/calibration_option.h"
#include "tools/cli/commands.h"
#include "tools/cli/network_option.h"
#include "tools/cli/output_checks.h"
#include "tools/cli/scale_down_option.h"
#include "tools/cli/variability_option.h"

namespace lacuna::cli {

namespace {

struct CompareOptions {
  std::string scenario;
  std::string json;
  std::string csv;
  std::string svg;
  bool no_svg = false;
  bool full = false;
  int32_t rank = 0;
  std::string out_dir = "lacuna-out";
  NetworkMode network = NetworkMode::kFlow;
  CalibrationOption calibration;
  int64_t scale_down = 1;
  scenario::ScenarioEdits edits;  // --set FIELD=VALUE
};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// One simulation: the summary and (when asked) the timeline of `rank`.
struct Run {
  report::Summary summary;
  std::optional<report::TimelineRow> row;
  std::string cost_model;
};

// `calibrated`: the --calibration model; null: the program's own lazy analytic model, as always.
Run simulate_placement(const ir::Program& program, const cost::CostModel* calibrated, bool fold, NetworkMode mode,
             std::optional<int32_t> rank) {
  const std::unique_ptr<cost::CostModel> analytic =
      calibrated != nullptr ? nullptr : run::make_cost_model({}, program.cluster(), program.info().precision());
  const cost::CostModel& cost = calibrated != nullptr ? *calibrated : *analytic;
  std::optional<report::PipelineSvg> svg;
  std::vector<engine::Observer*> observers;
  if (rank) {
    svg.emplace(program, report::parse_rank_spec(std::to_string(*rank)));
    observers.push_back(&*svg);
  }
  run::SummarizedRun simulated = run::simulate_and_summarize(program, cost, mode, fold, observers);
  Run run{std::move(simulated.summary), std::nullopt, simulated.run.models};
  if (svg) {
    std::vector<report::TimelineRow> rows = svg->rows();
    if (!rows.empty()) run.row = std::move(rows.front());
  }
  return run;
}

// The SVG row of one placement: its name, the rank drawn (its representative
// in fold mode) and the timeline; a note instead when there is none.
report::TimelineRow timeline_row(const std::string& name, const std::string& id, const Run* run,
                                 const std::string& note, int32_t rank) {
  report::TimelineRow row;
  if (run != nullptr && run->row) {
    row = *run->row;  // labelled with the drawn rank, ends at the iteration end
    row.sublabel = row.rank == rank ? row.label : fmt::format("{} (for rank {})", row.label, rank);
  } else {
    row.rank = rank;
    row.sublabel = fmt::format("rank {}", rank);
    row.note = note;
  }
  row.label = name;
  row.id = id;
  return row;
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// At most `max` bytes, cut at a UTF-8 character boundary, "…" when cut (an
// SVG note has one line).
std::string clip(std::string s, size_t max) {
  if (s.size() <= max) return s;
  size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut) + "…";
}

// For the table: the field and the message without the file location (the
// scenario is the one being compared).
std::string reason_of(const Error& e) {
  std::string r = e.where().field.empty() ? std::string() : e.where().field + ": ";
  r += e.problem();
  if (!e.fix().empty()) r += " (" + e.fix() + ")";
  return r;
}

void print_deadlock(const std::string& what, const engine::DeadlockError& e) {
  fmt::print(stderr, "lacuna: error: {}: deadlock: {}\n", what, e.what());
  constexpr size_t kShown = 20;
  const auto& blocked = e.blocked();
  for (size_t i = 0; i < blocked.size() && i < kShown; ++i) {
    const auto& b = blocked[i];
    fmt::print(stderr, "  rank {} stream {} op {}: {}\n", b.rank, b.stream, b.op, b.description);
  }
  if (blocked.size() > kShown) fmt::print(stderr, "  ... and {} more blocked ops\n", blocked.size() - kShown);
}

int run_compare(const CompareOptions& o) {
  const auto t_start = Clock::now();
  if (std::filesystem::path(o.scenario).extension() == ".pb") {
    throw Error(SourceLocation{o.scenario, 0, 0, {}}, "lacuna compare needs a scenario, not a compiled program",
                "pass the scenario file (.pbtxt, .textproto, .json): compare compiles it under every placement");
  }
  if (o.rank < 0) throw Error(SourceLocation{{}, 0, 0, "--rank"}, fmt::format("rank {} is negative", o.rank));
  const std::vector<NamedPath> inputs = {{"SCENARIO", o.scenario}, {"--calibration", o.calibration.profile}};
  check_outputs({{"--json", o.json}, {"--csv", o.csv}, {"--svg", o.no_svg ? std::string() : o.svg}}, inputs);
  const scenario::LoadedScenario loaded = scenario::load_scenario(o.scenario, o.scale_down, o.edits);
  const std::vector<scenario::PlacementKind> kinds = placement::applicable_placements(loaded);
  if (kinds.empty()) {
    throw Error(loaded.locations.locate("model"),
                "lacuna compare needs a multimodal scenario: model.encoders is empty",
                "add an encoder to `model`, or run `lacuna simulate` for an LLM-only scenario");
  }
  // With --calibration one model plans and times every placement (the profile
  // is read and the device checked now).
  const std::unique_ptr<cost::CostModel> calibrated =
      o.calibration.enabled()
          ? run::make_cost_model(o.calibration, loaded.spec.cluster(), loaded.spec.training().precision(), o.scenario)
          : nullptr;

  if (!o.no_svg && o.rank >= scenario::num_gpus(loaded.spec)) {
    throw Error(SourceLocation{{}, 0, 0, "--rank"},
                fmt::format("rank {} does not exist: the cluster has {} GPUs", o.rank, scenario::num_gpus(loaded.spec)),
                fmt::format("choose a rank below {}; rank 0, the LLM's first pipeline stage, exists in every placement",
                            scenario::num_gpus(loaded.spec)));
  }

  const std::string stem = run::file_stem_for(loaded.spec.name(), o.scenario);
  const std::string svg_path = o.no_svg ? std::string() : (!o.svg.empty() ? o.svg : o.out_dir + "/" + stem + ".compare.svg");
  if (!o.no_svg && o.svg.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.out_dir, ec);
    if (ec) throw Error(SourceLocation{o.out_dir, 0, 0, "--out-dir"}, "cannot create the output directory: " + ec.message());
  }
  check_outputs({{"--json", o.json}, {"--csv", o.csv}, {"--svg", svg_path}}, inputs);  // the default SVG path too
  // Opened now so that an unwritable path fails before the runs.
  std::optional<AtomicFile> svg_file, json_file, csv_file;
  if (!svg_path.empty()) svg_file.emplace(svg_path);
  if (!o.json.empty()) json_file.emplace(o.json);
  if (!o.csv.empty()) csv_file.emplace(o.csv);
  const bool fold = !o.full;
  const std::optional<int32_t> drawn = svg_file ? std::optional<int32_t>(o.rank) : std::nullopt;

  report::Comparison cmp;
  cmp.scenario_name = loaded.spec.name();
  cmp.scenario_file = o.scenario;
  cmp.folded = fold;
  report::CompareRunStats stats;
  bool deadlocked = false;

  // One placement at a time (a 3,072-GPU program is large): compile, then
  // simulate. What fails to compile or simulate becomes a row with the reason.
  std::vector<report::TimelineRow> rows;
  auto note_for = [&](const ir::Program* p, const std::string& error) {
    if (!error.empty() || p == nullptr) return clip("not simulated: " + first_line(error), 200);
    return fmt::format("rank {} does not exist here ({} GPUs)", o.rank, p->ranks_size());
  };
  // Simulates `program` into `run`, or says in `error` why it could not.
  auto simulate_into = [&](const std::string& what, const ir::Program& program, std::optional<Run>& run,
                           std::string& error, std::string& reason) {
    const bool has_rank = drawn && *drawn < program.ranks_size();
    try {
      run = simulate_placement(program, calibrated.get(), fold, o.network, has_rank ? drawn : std::nullopt);
      if (cmp.cost_model.empty()) cmp.cost_model = run->cost_model;
    } catch (const engine::DeadlockError& e) {
      print_deadlock(what, e);
      deadlocked = true;
      error = std::string("deadlock: ") + e.what();
      reason = error;
    } catch (const Error& e) {
      error = std::string("simulation failed: ") + e.what();
      reason = "simulation failed: " + reason_of(e);
    }
  };
  // The heterogeneous placement runs in both modes, each with the layouts the
  // scenario gives for it or derived (placement::choose_heterogeneous).
  struct Entry {
    scenario::PlacementKind kind;
    std::optional<placement::HeteroMode> mode;
  };
  std::vector<Entry> entries;
  for (scenario::PlacementKind kind : kinds) {
    if (kind != scenario::HETEROGENEOUS) {
      entries.push_back({kind, std::nullopt});
      continue;
    }
    entries.push_back({kind, placement::HeteroMode::kColocated});
    entries.push_back({kind, placement::HeteroMode::kNonColocated});
  }
  for (const Entry& entry : entries) {
    const scenario::PlacementKind kind = entry.kind;
    report::PlacementOutcome outcome;
    outcome.kind = kind;
    if (entry.mode) outcome.variant = std::string(placement::hetero_mode_name(*entry.mode));
    const std::string name = report::outcome_name(outcome);
    std::optional<ir::Program> program;
    const auto t0 = Clock::now();
    try {
      if (entry.mode) {
        placement::HeteroChoice choice = calibrated
                                             ? placement::choose_heterogeneous(loaded, *entry.mode, *calibrated)
                                             : placement::choose_heterogeneous(loaded, *entry.mode);
        outcome.layout = choice.description;
        program = std::move(choice.program);
      } else {
        program = calibrated ? placement::compile_as(loaded, kind, *calibrated) : placement::compile_as(loaded, kind);
      }
    } catch (const Error& e) {
      outcome.error = e.what();
      outcome.reason = reason_of(e);
    }
    if (kind == scenario::OPTIMUS && program) stats.optimus_planner_seconds = seconds_since(t0);
    // Over HBM even at the recompute its planner chose: simulated, not ranked.
    if (program) outcome.over_memory = placement::infeasibility_reason(*program);
    std::optional<Run> run;
    if (program) simulate_into(name, *program, run, outcome.error, outcome.reason);
    if (run) outcome.summary = run->summary;
    if (drawn) {
      rows.push_back(timeline_row(name, "placement-" + report::outcome_key(outcome), run ? &*run : nullptr,
                                  note_for(program ? &*program : nullptr,
                                           outcome.reason.empty() ? outcome.error : outcome.reason),
                                  o.rank));
    }
    cmp.placements.push_back(std::move(outcome));
  }
  {
    std::optional<ir::Program> program;
    try {
      const scenario::LoadedScenario llm = placement::llm_only(loaded);
      program = calibrated ? placement::compile(llm, *calibrated) : placement::compile(llm);
    } catch (const Error& e) {
      cmp.llm_only_error = e.what();
    }
    std::optional<Run> run;
    std::string reason;
    if (program) simulate_into("LLM alone", *program, run, cmp.llm_only_error, reason);
    if (run) cmp.llm_only = run->summary;
    if (drawn && (run || !cmp.llm_only_error.empty())) {
      rows.push_back(timeline_row("LLM alone", "llm-only", run ? &*run : nullptr,
                                  note_for(program ? &*program : nullptr, cmp.llm_only_error), o.rank));
    }
  }

  bool any_simulated = false;
  for (const auto& p : cmp.placements) any_simulated |= p.summary.has_value();
  stats.total_wall_seconds = seconds_since(t_start);
  fmt::print("{}", report::format_comparison(cmp, stats));
  if (deadlocked) return 3;  // nothing written (the temporary files are removed)
  if (!any_simulated) {
    throw Error(SourceLocation{o.scenario, 0, 0, {}}, "no placement of this scenario could be simulated",
                "see the reasons above");
  }

  if (svg_file) {
    report::TimelineDocument doc;
    doc.title = fmt::format("{} — placements compared at rank {}",
                            cmp.scenario_name.empty() ? std::string("lacuna") : cmp.scenario_name, o.rank);
    std::string sub;
    int64_t end = 0;
    for (const auto& p : cmp.placements) {
      if (!p.summary) continue;
      sub += fmt::format("{}{} {}", sub.empty() ? "" : " · ", report::outcome_name(p),
                         report::format_duration(p.summary->iteration_time));
      end = std::max(end, p.summary->iteration_time.count());
    }
    if (cmp.llm_only) {
      sub += fmt::format(" · LLM alone {}", report::format_duration(cmp.llm_only->iteration_time));
      end = std::max(end, cmp.llm_only->iteration_time.count());
    }
    doc.subtitle = sub;
    doc.end_ns = end;
    doc.mark_row_ends = true;
    doc.rows = std::move(rows);
    svg_file->write(report::render_timeline_svg(doc));
  }
  if (json_file) json_file->write(report::comparison_json(cmp));
  if (csv_file) csv_file->write(report::comparison_csv(cmp));
  if (svg_file) svg_file->commit();
  if (json_file) json_file->commit();
  if (csv_file) csv_file->commit();
  if (svg_file || json_file || csv_file) fmt::print("\n");
  if (svg_file) fmt::print("  svg    {}  (rank {} of every placement)\n", svg_path, o.rank);
  if (json_file) fmt::print("  json   {}\n", o.json);
  if (csv_file) fmt::print("  csv    {}\n", o.csv);
  return 0;
}

}  // namespace

void add_compare_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<CompareOptions>();
  CLI::App* sub = app.add_subcommand(
      "compare", "Simulate a multimodal scenario under every applicable placement and compare them side by side");
  sub->add_option("SCENARIO", o->scenario, "multimodal scenario (.pbtxt, .textproto, .json)")->required();
  sub->add_option("--json", o->json, "write the comparison as JSON to FILE")->check(output_file());
  sub->add_option("--csv", o->csv,
                  "write one CSV row per placement to FILE: the headline metrics and bubble categories "
                  "(docs/outputs.md#csv)")
      ->check(output_file());
  sub->add_option("--svg", o->svg, "write the timelines to FILE (default DIR/<scenario>.compare.svg)")
      ->check(output_file());
  sub->add_flag("--no-svg", o->no_svg, "do not write the SVG");
  sub->add_flag("--full", o->full, "simulate every rank (default: one representative per class of identical ranks)");
  add_network_option(sub, o->network);
  add_calibration_options(sub, o->calibration);
  add_scale_down_option(sub, o->scale_down);
  add_set_option(sub, o->edits);
  sub->add_option("--rank", o->rank, "rank whose timeline the SVG shows for every placement")->capture_default_str();
  sub->add_option("--out-dir", o->out_dir, "directory for the default SVG (created if missing)")->capture_default_str();
  sub->callback([o, &action] { action = [o] { return run_compare(*o); }; });
}

}  // namespace lacuna::cli
