// `lacuna calibrate`: measure kernel (and, on GPUs, NCCL collective) times
// and write a calibration profile for `lacuna simulate --calibration`. The
// work is in calib/calibrate.h; this file is the command line.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "calib/calibrate.h"
#include "sim/calibration/profile_io.h"
#include "sim/core/output_path.h"
#include "sim/kernelfit/fit_report.h"
#include "sim/kernelfit/table_profile.h"
#include "sim/scenario/scenario.h"
#include "tools/cli/commands.h"
#include "tools/cli/output_checks.h"
#include "tools/cli/scale_down_option.h"
#include "tools/cli/scenario_shapes.h"

namespace lacuna::cli {

namespace {

struct CalibrateCliOptions {
  calibrate::CalibrateOptions options;
  bool cpu = false;
  bool gpu = false;
  bool no_grid = false;
  bool no_collectives = false;
  std::vector<std::string> only;
  std::string from_table;
};

// --from-table: a measured kernel table (the device campaign's) as a profile.
// Its preset is the table's gpu column; the profile is BF16 when the table
// has BF16 rows, else FP16.
int run_from_table(const CalibrateCliOptions& c) {
  check_outputs({{"--output", c.options.output}}, {{"--from-table", c.from_table}});
  const kernelfit::MeasuredTable t = kernelfit::read_measured_table_with_comments(c.from_table);
  const std::string preset = kernelfit::table_preset(t.rows, "");
  const bool bf16 = std::any_of(t.rows.begin(), t.rows.end(),
                                [](const kernelfit::MeasuredKernel& k) { return k.dtype == scenario::BF16; });
  int left_out = 0;
  const calib::CalibrationProfile p = kernelfit::profile_from_table(
      t.rows, scenario::hardware_preset(preset).gpu(), bf16 ? scenario::BF16 : scenario::FP16, t.comments, &left_out);
  calibration::write_profile(p, c.options.output);
  int points = 0;
  for (const auto& op : p.ops()) points += op.points_size();
  fmt::print("{} {} points in {} kernel tables from {} ({}; {} rows without a time, of another precision or a "
             "repeated shape left out)\n  profile {}\n",
             points, bf16 ? "BF16" : "FP16", p.ops_size(), c.from_table, p.device().name(), left_out, c.options.output);
  return 0;
}

int run_calibrate(CalibrateCliOptions& c) {
  if (!c.from_table.empty()) return run_from_table(c);
  // Before measuring (minutes): the profile is never one of the scenarios
  // read, nor a path that cannot be written.
  std::vector<NamedPath> inputs;
  for (const std::string& s : c.options.scenarios) inputs.push_back({"--scenario", s});
  check_outputs({{"--output", c.options.output}}, inputs);
  calibrate::CalibrateOptions o = c.options;
  o.device = c.cpu ? calibrate::DeviceChoice::kCpu
                   : (c.gpu ? calibrate::DeviceChoice::kGpu : calibrate::DeviceChoice::kAuto);
  o.grid = !c.no_grid;
  o.collectives = !c.no_collectives;
  for (const std::string& s : c.only) {
    for (ir::OpClass k : calibrate::parse_op_classes(s)) o.only.push_back(k);
  }
  o.scenario_shapes = [](const std::string& path, int64_t scale_down) {
    return extract_shapes_from_scenario(path, scale_down);
  };
  return calibrate::run_calibrate(o, stdout, stderr);
}

}  // namespace

void add_calibrate_command(CLI::App& app, Action& action) {
  auto c = std::make_shared<CalibrateCliOptions>();
  CLI::App* sub = app.add_subcommand(
      "calibrate", "Measure kernel and collective times on this machine and write a calibration profile");
  sub->add_option("--scenario", c->options.scenarios,
                  "measure the kernels this scenario runs (repeatable); default: a built-in family set "
                  "(GPU: ViT-22B + GPT-175B TP-8 layers; CPU: scenarios/cpu/tiny-mllm-cpu-8rank.pbtxt)");
  auto* cpu = sub->add_flag("--cpu", c->cpu, "calibrate the float32 CPU reference kernels");
  auto* gpu = sub->add_flag("--gpu", c->gpu, "calibrate GPU 0 (CUDA kernels, cuBLAS) and NCCL on all local GPUs");
  cpu->excludes(gpu);
  auto* table = sub->add_option("--from-table", c->from_table,
                                "write the profile from a measured kernel table instead of measuring (the device "
                                "campaign's, calib/measurements/README.md): the preset's GPU as device, exact at the "
                                "measured shapes, a fitted roofline elsewhere");
  table->excludes(cpu);
  table->excludes(gpu);
  sub->add_option("-o,--output", c->options.output, "profile to write (protobuf text, written atomically)")
      ->check(output_file())
      ->required();
  sub->add_option("--repetitions", c->options.repetitions, "timed runs per point (default: GPU 20, CPU 5)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--warmup", c->options.warmup, "untimed runs before the timed ones (default: GPU 5, CPU 1)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--max-point-seconds", c->options.max_point_seconds,
                  "CPU: skip points estimated to take longer than this per run (default 0.5); the simulator "
                  "extrapolates them")
      ->check(CLI::PositiveNumber);
  sub->add_flag("--no-grid", c->no_grid, "measure only the exact shapes of the scenario(s), no interpolation grid");
  sub->add_flag("--no-collectives", c->no_collectives, "skip the NCCL collective benchmarks");
  sub->add_option("--only", c->only, "measure only these op classes, e.g. GEMM,ATTENTION")->delimiter(',');
  sub->add_option("--concurrency", c->options.concurrency,
                  "CPU: time each kernel while N - 1 other threads run copies of it, as N ranks computing at once "
                  "on N cores do under `lacuna execute --compute-slots N` (default 1: alone)")
      ->check(CLI::PositiveNumber);
  add_scale_down_option(sub, c->options.scale_down);
  sub->callback([c, &action] { action = [c] { return run_calibrate(*c); }; });
}

}  // namespace lacuna::cli
