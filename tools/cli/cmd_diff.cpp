// `lacuna diff PREDICTED MEASURED` (JSON or span traces): a prediction against a
// measurement of the same program — iteration-time error, errors per op class
// and stream, bubbles only one of them has — and optionally both timelines of
// one rank in an SVG (docs/diff.md).
#include <cmath>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "sim/core/atomic_file.h"
#include "sim/core/error.h"
#include "sim/report/analyses/diff.h"
#include "sim/report/formats/diff_format.h"
#include "sim/report/formats/diff_svg.h"
#include "tools/cli/commands.h"
#include "tools/cli/output_checks.h"

namespace lacuna::cli {

namespace {

struct DiffCommandOptions {
  std::string predicted;
  std::string measured;
  std::string svg;
  std::string json;
  std::optional<int32_t> rank;
  std::optional<double> min_bubble_us;
  size_t top = 10;
};

int run_diff(const DiffCommandOptions& o) {
  report::DiffOptions options;
  if (o.min_bubble_us) {
    if (!std::isfinite(*o.min_bubble_us) || *o.min_bubble_us < 0) {
      throw Error(SourceLocation{{}, 0, 0, "--min-bubble-us"},
                  fmt::format("{} is not a duration: give a non-negative number of microseconds", *o.min_bubble_us));
    }
    options.min_bubble_ns = static_cast<int64_t>(std::llround(*o.min_bubble_us * 1e3));
  }
  check_outputs({{"--svg", o.svg}, {"--json", o.json}}, {{"PREDICTED", o.predicted}, {"MEASURED", o.measured}});
  const report::DiffInput predicted = report::load_diff_input(o.predicted);
  const report::DiffInput measured = report::load_diff_input(o.measured);
  const report::DiffReport diff = report::diff_runs(predicted, measured, options);
  // The rank is checked, and the files opened, before anything is printed.
  const int32_t drawn = o.svg.empty() ? -1 : report::diff_svg_rank(diff, o.rank, "--rank");
  std::optional<AtomicFile> svg_file, json_file;
  if (!o.svg.empty()) svg_file.emplace(o.svg);
  if (!o.json.empty()) json_file.emplace(o.json);

  fmt::print("{}", report::format_diff(diff, o.top));
  if (svg_file) svg_file->write(report::render_diff_svg(predicted, measured, diff, drawn));
  if (json_file) json_file->write(report::diff_json(diff));
  if (svg_file) svg_file->commit();
  if (json_file) json_file->commit();
  if (svg_file || json_file) fmt::print("\n");
  if (svg_file) fmt::print("  svg    {}  (rank {}, predicted above measured)\n", o.svg, drawn);
  if (json_file) fmt::print("  json   {}\n", o.json);
  return 0;
}

}  // namespace

void add_diff_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<DiffCommandOptions>();
  CLI::App* sub = app.add_subcommand(
      "diff", "Compare a prediction (simulate --json or --spans) with a measurement (execute --json or --spans) of the "
              "same program");
  sub->add_option("PREDICTED", o->predicted, "JSON or span trace written by `lacuna simulate --json / --spans`")
      ->required();
  sub->add_option("MEASURED", o->measured, "JSON or span trace written by `lacuna execute --json / --spans`")
      ->required();
  sub->add_option("--svg", o->svg, "draw one rank's timelines, predicted above measured, to FILE")
      ->check(output_file());
  sub->add_option("--json", o->json, "write the comparison as JSON to FILE")->check(output_file());
  sub->add_option("--rank", o->rank, "rank the SVG draws (default: the first rank in both timelines)");
  sub->add_option("--min-bubble-us", o->min_bubble_us,
                  "a compute-stream gap this long (µs) or longer is a bubble (default: 1 % of the predicted iteration)");
  sub->add_option("--top", o->top, "how many mismatched bubbles each list shows")->capture_default_str();
  sub->callback([o, &action] { action = [o] { return run_diff(*o); }; });
}

}  // namespace lacuna::cli
