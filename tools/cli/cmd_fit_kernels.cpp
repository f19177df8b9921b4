// `lacuna fit-kernels TABLE...`: the per-shape efficiency model of a hardware
// preset fitted to measured kernel tables (calib/measurements/README.md), with
// its error per kernel class before the fit (the preset as shipped), after it
// and held out (cross-validation), and the parameters as a GpuSpec fragment
// (docs/cost-model.md#fitted-to-measured-kernels).
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>

#include <fmt/format.h>

#include "sim/core/atomic_file.h"
#include "sim/core/error.h"
#include "sim/core/output_path.h"
#include "sim/kernelfit/efficiency_fit.h"
#include "sim/kernelfit/fit_report.h"
#include "sim/kernelfit/measured_table.h"
#include "sim/scenario/scenario.h"
#include "tools/cli/commands.h"
#include "tools/cli/output_checks.h"

namespace lacuna::cli {
namespace {

struct FitKernelsOptions {
  std::vector<std::string> tables;
  std::string preset;
  std::string csv;
  std::string svg;
  bool best_case_base = false;
};

int run_fit(const FitKernelsOptions& o) {
  std::vector<NamedPath> inputs;
  for (const std::string& t : o.tables) inputs.push_back({"TABLE", t});
  check_outputs({{"--csv", o.csv}, {"--svg", o.svg}}, inputs);

  std::vector<kernelfit::MeasuredKernel> rows;
  for (const std::string& t : o.tables) {
    auto more = kernelfit::read_measured_table(t);
    rows.insert(rows.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  }
  const std::string preset = kernelfit::table_preset(rows, o.preset);
  // The base is what the "preset" column scores and what every parameter the
  // rows do not inform keeps; the fitted values do not depend on it.
  const scenario::GpuSpec base = o.best_case_base ? scenario::best_case_kernel_model(preset)
                                                  : scenario::hardware_preset(preset).gpu();
  if (o.best_case_base) fmt::print("Base: the kernel model before the fit (scenario::best_case_kernel_model).\n");
  const kernelfit::FitReport rep = kernelfit::fit_and_validate(base, rows);
  fmt::print("{}", kernelfit::format_report(rep, preset, o.tables));
  if (!o.csv.empty()) {
    write_file_atomically(o.csv, kernelfit::report_csv(rep));
    fmt::print("  csv    {}\n", o.csv);
  }
  if (!o.svg.empty()) {
    write_file_atomically(o.svg, kernelfit::report_svg(rep, preset));
    fmt::print("  svg    {}\n", o.svg);
  }
  return 0;
}

}  // namespace

void add_fit_kernels_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<FitKernelsOptions>();
  CLI::App* sub = app.add_subcommand(
      "fit-kernels",
      "Fit a preset's per-shape kernel efficiency model to measured kernel tables, with cross-validated errors "
      "(docs/cost-model.md#fitted-to-measured-kernels)");
  sub->add_option("tables", o->tables, "measured kernel tables (calib/measurements/README.md), all of one GPU")
      ->required();
  sub->add_option("--preset", o->preset,
                  "the hardware preset to fit (default: the tables' gpu column; a row of another GPU is refused)");
  sub->add_flag("--best-case-base", o->best_case_base,
                "score the preset column with the kernel model before the fit to measured kernels (best-case "
                "single-kernel rates) instead of the preset as shipped");
  sub->add_option("--csv", o->csv, "also write every row's measured, before, fitted and held-out times to FILE")
      ->check(output_file());
  sub->add_option("--svg", o->svg, "also plot predicted against measured time per kernel class to FILE")
      ->check(output_file());
  sub->callback([o, &action] { action = [o] { return run_fit(*o); }; });
}

}  // namespace lacuna::cli
