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
#include "sim/report/formats/compare_csv.h"
#include "sim/report/analyses/compare_report.h"
#include "sim/report/formats/format.h"
#include "sim/report/formats/names.h"
#include "sim/report/formats/pipeline_svg.h"
#include "sim/report/analyses/summary.h"
#include "sim/run/program_input.h"
#include "sim/run/placement_comparison.h"
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

  run::ComparisonRun result = run::compare_placements(
      loaded, kinds, run::ComparisonOptions{o.network, fold, calibrated.get(), drawn});
  report::Comparison& cmp = result.comparison;
  cmp.scenario_name = loaded.spec.name();
  cmp.scenario_file = o.scenario;
  report::CompareRunStats& stats = result.stats;
  for (const auto& [what, e] : result.deadlocks) print_deadlock(what, e);
  const bool deadlocked = !result.deadlocks.empty();
  std::vector<report::TimelineRow>& rows = result.rows;

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
