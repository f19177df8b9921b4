// `lacuna simulate INPUT`: one iteration, the summary table, and (after the
// run succeeded) the trace, the SVG and optionally the JSON summary.
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "sim/core/atomic_file.h"
#include "sim/engine/simulator.h"
#include "sim/report/bubble_accounting.h"
#include "sim/report/comm_accounting.h"
#include "sim/report/link_summary.h"
#include "sim/report/json_report.h"
#include "sim/report/pipeline_svg.h"
#include "sim/report/rank_spec.h"
#include "sim/report/summary.h"
#include "sim/report/terminal_report.h"
#include "sim/report/timeline.h"
#include "sim/report/trace_writer.h"
#include "tools/cli/calibration_option.h"
#include "tools/cli/commands.h"
#include "tools/cli/load_input.h"
#include "tools/cli/network_option.h"
#include "tools/cli/scale_down_option.h"

namespace lacuna::cli {

namespace {

struct SimulateOptions {
  std::string input;
  bool fold = false;
  std::string json;
  std::string trace;
  std::string svg;
  std::string trace_ranks = "pipeline";
  std::string out_dir = "lacuna-out";
  bool no_trace = false;
  bool no_svg = false;
  NetworkMode network = NetworkMode::kFlow;
  CalibrationOption calibration;
  int64_t scale_down = 1;
};

void ensure_directory(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    throw Error(SourceLocation{dir, 0, 0, "--out-dir"}, "cannot create the output directory: " + ec.message());
  }
}

int run_simulate(const SimulateOptions& o) {
  // The cost model compiles (plans) and times the program: calibrated with
  // --calibration, else the lazily built analytic model.
  const SimulationInput input = load_simulation_input(o.input, o.calibration, o.scale_down);
  const ir::Program& program = input.program;
  const cost::CostModel& cost = *input.cost;
  // Coverage walks the program's kernels before the run: a kernel class the
  // profile lacks fails here, before any output file is opened.
  std::optional<report::CalibrationCoverage> coverage;
  if (const auto* calibrated = input.calibrated()) coverage = coverage_section(*calibrated, program);
  const report::RankSpec spec = report::parse_rank_spec(o.trace_ranks);
  (void)report::select_ranks(spec, program);  // a bad selection fails before the run

  const std::string stem = file_stem_for(program.info().scenario_name(), o.input);
  const std::string trace_path =
      o.no_trace ? std::string() : (!o.trace.empty() ? o.trace : o.out_dir + "/" + stem + ".trace.json");
  const std::string svg_path = o.no_svg ? std::string() : (!o.svg.empty() ? o.svg : o.out_dir + "/" + stem + ".svg");
  if ((!o.no_trace && o.trace.empty()) || (!o.no_svg && o.svg.empty())) ensure_directory(o.out_dir);

  NetworkSetup network(program, o.network);
  engine::Simulator sim(program, cost, network.apply(engine::SimulationOptions{.fold = o.fold}));
  report::BubbleAccounting accounting;
  sim.add_observer(&accounting);
  report::CommAccounting comm;
  sim.add_observer(&comm);
  std::optional<report::TraceWriter> trace;
  if (!trace_path.empty()) {
    trace.emplace(program, trace_path, spec);
    sim.add_observer(&*trace);
    network.add_link_observer(trace->link_observer());
  }
  // The JSON carries the traced ranks' per-op timeline, for `lacuna diff`.
  std::optional<report::TimelineRecorder> timeline;
  if (!o.json.empty()) {
    timeline.emplace(program, spec);
    sim.add_observer(&*timeline);
  }
  std::optional<report::PipelineSvg> svg;
  if (!svg_path.empty()) {
    svg.emplace(program, spec);
    sim.add_observer(&*svg);
  }
  // Opened now so that an unwritable path fails before a long run; each
  // appears under its name only on commit().
  std::optional<AtomicFile> svg_file, json_file;
  if (!svg_path.empty()) svg_file.emplace(svg_path);
  if (!o.json.empty()) json_file.emplace(o.json);

  const auto t0 = std::chrono::steady_clock::now();
  const engine::SimulationResult result = sim.run();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  report::Summary summary = report::summarize(program, accounting, network.describe(cost), o.fold);
  summary.comm = report::summarize_comm(comm);
  summary.links = network.flow() != nullptr
                      ? report::summarize_links(network.flow()->links(), network.flow()->link_stats(result.end_time))
                      : report::analytic_links();
  summary.calibration = std::move(coverage);
  if (timeline) summary.timeline = timeline->timeline();
  if (svg_file) svg_file->write(svg->render());
  if (json_file) json_file->write(report::summary_json(summary));
  if (trace) trace->commit();
  if (svg_file) svg_file->commit();
  if (json_file) json_file->commit();

  fmt::print("{}", report::format_summary(summary, report::RunStats{wall, result.events}));
  if (trace || svg || !o.json.empty()) fmt::print("\n");
  if (trace) {
    fmt::print("  trace  {}  ({} ranks; open the trace at https://ui.perfetto.dev)\n", trace_path,
               trace->traced_ranks().size());
  }
  if (svg) fmt::print("  svg    {}  ({} ranks)\n", svg_path, svg->drawn_ranks().size());
  if (!o.json.empty()) fmt::print("  json   {}\n", o.json);
  return 0;
}

}  // namespace

void add_simulate_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<SimulateOptions>();
  CLI::App* sub = app.add_subcommand("simulate", "Simulate one training iteration and report time, MFU and bubbles");
  sub->add_option("INPUT", o->input, "scenario (.pbtxt, .textproto, .json) or program from `lacuna compile` (.pb)")
      ->required();
  sub->add_flag("--fold", o->fold, "simulate one representative per class of identical ranks");
  add_network_option(sub, o->network);
  add_calibration_options(sub, o->calibration);
  add_scale_down_option(sub, o->scale_down);
  sub->add_option("--json", o->json, "write the summary (and the traced ranks' per-op timeline) as JSON to FILE");
  sub->add_option("--trace", o->trace, "write the Perfetto trace to FILE (default DIR/<scenario>.trace.json)");
  sub->add_option("--svg", o->svg, "write the pipeline picture to FILE (default DIR/<scenario>.svg)");
  sub->add_option("--trace-ranks", o->trace_ranks,
                  "ranks to draw: pipeline (default), all, a list like 0-7,64, or stage:N");
  sub->add_option("--out-dir", o->out_dir, "directory for the default trace and SVG (created if missing)")
      ->capture_default_str();
  sub->add_flag("--no-trace", o->no_trace, "do not write the trace");
  sub->add_flag("--no-svg", o->no_svg, "do not write the SVG");
  sub->callback([o, &action] { action = [o] { return run_simulate(*o); }; });
}

}  // namespace lacuna::cli
