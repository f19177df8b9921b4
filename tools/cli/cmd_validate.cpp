// `lacuna validate`: predicted vs published, in one command (docs/validation.md).
// The runs are the library's (sim/run/validation.h); this prints the tables
// and writes them as JSON.
#include <cmath>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/core/atomic_file.h"
#include "sim/core/error.h"
#include "sim/run/validation.h"
#include "tools/cli/calibration_option.h"
#include "tools/cli/commands.h"
#include "tools/cli/network_option.h"
#include "tools/cli/output_checks.h"

namespace lacuna::cli {

namespace {

struct ValidateOptions {
  run::ValidationOptions run;
  std::string json;
};

// ---------------------------------------------------------------- output

std::string pct(double e) {
  const double v = std::round(e * 1000) / 10;  // one decimal, and no "-0.0"
  return fmt::format("{:+.1f} %", v == 0 ? 0.0 : v);
}

void print_table(const run::ValidationTable& t, const std::string& profile, const std::string& measured_on) {
  const bool calibrated = !profile.empty() && t.key != "nccl";
  fmt::print("{}\n", t.title);
  fmt::print("  simulated with: {}\n\n", t.simulated_with);
  if (t.key == "nccl") {
    fmt::print("| setup | collective | GPUs | time (ms) | predicted busbw (GB/s) | published (GB/s) | error |\n");
    fmt::print("|---|---|---|---|---|---|---|\n");
    for (const run::ValidationRow& r : t.rows)
      fmt::print("| {} | {} | {} | {:.3f} | {:.1f} | {} | {} |\n", r.name, r.detail, r.gpus, r.iteration_s * 1e3,
                 r.predicted, r.published, pct(r.error()));
  } else {
    const bool ptdp = t.key == "ptdp";
    const char* value = ptdp ? "{:.1f}" : "{:.3f}";
    auto v = [&](double x) { return fmt::format(fmt::runtime(value), x); };
    fmt::print("{}", ptdp ? "| scenario | plan | GPUs | batch | iteration (s) | published TFLOP/s/GPU | before | error "
                            "before | predicted | error |"
                          : "| scenario | plan | GPUs | batch | published iteration (s) | before (s) | error before | "
                            "predicted (s) | error |");
    fmt::print("{}\n", calibrated ? " calibrated | error calibrated | kernel time exact |" : "");
    fmt::print("|---|---|---|---|---|---|---|---|---|{}{}\n", ptdp ? "---|" : "", calibrated ? "---|---|---|" : "");
    for (const run::ValidationRow& r : t.rows) {
      fmt::print("| {} | {} | {} | {} | ", r.name, r.detail, r.gpus, r.batch);
      if (ptdp) fmt::print("{:.3f} | ", r.iteration_s);
      fmt::print("{} | {} | {} | {} | {} |", r.published, v(r.before.value_or(0)), pct(r.before_error()),
                 v(r.predicted), pct(r.error()));
      if (calibrated) {
        if (r.calibrated)
          fmt::print(" {} | {} | {:.0f} % |", v(*r.calibrated), pct(r.calibrated_error()),
                     r.calibrated_exact_share * 100);
        else
          fmt::print(" — ({}) | | |", r.not_calibrated);
      }
      fmt::print("\n");
    }
  }
  if (t.key != "nccl")
    fmt::print("\nBefore = the kernel model before its fit to measured kernels (best-case single-kernel rates, "
               "docs/cost-model.md#fitted-to-measured-kernels); predicted = as shipped.\n"
               "Mean absolute error before {:.1f} % (bias {}), as shipped {:.1f} % (bias {}).\n",
               t.mae_before() * 100, pct(t.bias_before()), t.mae() * 100, pct(t.bias()));
  if (calibrated)
    fmt::print("Calibrated = simulated with the kernel times of {} ({}; interpolated or extrapolated where the "
               "kernel time is not exact): {} of {} rows, mean absolute error {:.1f} % over them.\n",
               profile, measured_on, t.calibrated_rows(), t.rows.size(),
               t.mae_calibrated() * 100);
  if (const run::ValidationRow* w = t.worst())
    fmt::print("\nMean absolute error {:.1f} %; worst row {} at {}.\n\n", t.mae() * 100, w->name, pct(w->error()));
}

nlohmann::json table_json(const run::ValidationTable& t) {
  nlohmann::json rows = nlohmann::json::array();
  for (const run::ValidationRow& r : t.rows) {
    nlohmann::json j{{"name", r.name},
                     {"detail", r.detail},
                     {"gpus", r.gpus},
                     {"predicted", r.predicted},
                     {"published_low", r.lo},
                     {"published_high", r.hi},
                     {"published", r.published},
                     {"error", r.error()},
                     {"simulated_time_s", r.iteration_s}};
    if (r.batch > 0) j["global_batch"] = r.batch;
    if (r.before) {
      j["predicted_before_fit"] = *r.before;
      j["error_before_fit"] = r.before_error();
    }
    if (r.calibrated) {
      j["predicted_calibrated"] = *r.calibrated;
      j["error_calibrated"] = r.calibrated_error();
      j["calibrated_kernel_time_exact_share"] = r.calibrated_exact_share;
    } else if (!r.not_calibrated.empty()) {
      j["not_calibrated"] = "the profile was not measured on " + r.not_calibrated;
    }
    rows.push_back(std::move(j));
  }
  const run::ValidationRow* w = t.worst();
  return {{"title", t.title},
          {"unit", t.unit},
          {"simulated_with", t.simulated_with},
          {"rows", rows},
          {"mean_absolute_error", t.mae()},
          {"mean_absolute_error_before_fit", t.mae_before()},
          {"calibrated_rows", t.calibrated_rows()},
          {"mean_absolute_error_calibrated", t.mae_calibrated()},
          {"worst_row", w ? w->name : ""},
          {"worst_error", w ? w->error() : 0.0}};
}

int run_validate(const ValidateOptions& o) {
  check_outputs({{"--json", o.json}}, {{"--calibration", o.run.calibration.profile}});
  std::optional<AtomicFile> json_file;
  if (!o.json.empty()) json_file.emplace(o.json);  // an unwritable path fails before the runs
  const run::ValidationResult result = run::run_validation(o.run);
  for (const run::ValidationTable& t : result.tables)
    print_table(t, o.run.calibration.profile, result.calibration_measured_on);
  if (json_file) {
    nlohmann::json j{{"network", o.run.network == NetworkMode::kFlow ? "flow" : "analytic"}};
    if (o.run.calibration.enabled())
      j["calibration"] = {{"profile", o.run.calibration.profile}, {"measured_on", result.calibration_measured_on}};
    for (const run::ValidationTable& t : result.tables) j["tables"][t.key] = table_json(t);
    json_file->write(j.dump(2) + "\n");
    json_file->commit();
    fmt::print("  json   {}\n", o.json);
  }
  return 0;
}

}  // namespace

void add_validate_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<ValidateOptions>();
  CLI::App* sub = app.add_subcommand(
      "validate", "Predicted vs published: nccl-tests collectives, PTD-P Table 1, SAR Table 5 (docs/validation.md)");
  add_network_option(sub, o->run.network);
  sub->add_option("--json", o->json, "also write every table as JSON to FILE")->check(output_file());
  sub->add_option("--only", o->run.only, "run one table: nccl, ptdp or sar")
      ->check(CLI::IsMember({"nccl", "ptdp", "sar"}));
  sub->add_option("--scenarios", o->run.scenarios,
                  "folder with ptdp-*.pbtxt and sar-*.pbtxt (default: scenarios/validation found upwards from the "
                  "working directory or the executable)");
  sub->add_option("-j,--jobs", o->run.jobs, "rows simulated in parallel (default: one per hardware thread)");
  add_calibration_options(sub, o->run.calibration);
  sub->callback([o, &action] { action = [o] { return run_validate(*o); }; });
}

}  // namespace lacuna::cli
