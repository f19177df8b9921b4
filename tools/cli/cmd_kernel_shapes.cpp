// `lacuna kernel-shapes SCENARIO... -o FILE`: the distinct kernels the
// scenarios' compiled programs run, as a measured kernel table with no times
// (calib/measurements/README.md): the shape list the device campaign
// measures (calib/device/campaign).
#include <filesystem>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "sim/core/atomic_file.h"
#include "sim/core/output_path.h"
#include "sim/kernelfit/program_shapes.h"
#include "sim/placement/compile.h"
#include "sim/scenario/scenario.h"
#include "tools/cli/commands.h"
#include "tools/cli/output_checks.h"
#include "tools/cli/scale_down_option.h"

namespace lacuna::cli {
namespace {

struct KernelShapesOptions {
  std::vector<std::string> scenarios;
  std::string preset;
  std::string output;
  int64_t scale_down = 1;
};

int run_shapes(const KernelShapesOptions& o) {
  std::vector<NamedPath> inputs;
  for (const std::string& s : o.scenarios) inputs.push_back({"SCENARIO", s});
  check_outputs({{"--output", o.output}}, inputs);
  std::vector<kernelfit::MeasuredKernel> rows;
  std::vector<std::string> comments = {
      "kernel shapes to measure, written by `lacuna kernel-shapes`: one row per distinct kernel of the compiled "
      "programs (time_us empty)"};
  int used = 0;
  for (const std::string& path : o.scenarios) {
    const scenario::LoadedScenario s = scenario::load_scenario(path, o.scale_down);
    const std::string preset = s.spec.cluster().preset();
    if (!o.preset.empty() && preset != o.preset) {
      fmt::print(stderr, "kernel-shapes: {} runs on {}, not {}: skipped\n", path, preset.empty() ? "no preset" : preset,
                 o.preset);
      continue;
    }
    if (preset.empty()) {
      fmt::print(stderr, "kernel-shapes: {} names no hardware preset: skipped\n", path);
      continue;
    }
    const kernelfit::ProgramShapes shapes =
        kernelfit::program_shapes(placement::compile(s), preset, std::filesystem::path(path).stem().string());
    comments.push_back(fmt::format("{}: {} distinct kernels on {}{}", path, shapes.rows.size(), preset,
                                   shapes.skipped_ops ? fmt::format(" ({} ops with a given duration or in float32 "
                                                                    "skipped)", shapes.skipped_ops)
                                                      : ""));
    kernelfit::merge_program_shapes(rows, shapes.rows);
    ++used;
  }
  if (o.scale_down > 1) comments.push_back(fmt::format("scaled down by {} (--scale-down)", o.scale_down));
  write_file_atomically(o.output, kernelfit::format_measured_table(rows, comments));
  fmt::print("{} distinct kernels from {} of {} scenarios\n  table  {}\n", rows.size(), used, o.scenarios.size(),
             o.output);
  return 0;
}

}  // namespace

void add_kernel_shapes_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<KernelShapesOptions>();
  CLI::App* sub = app.add_subcommand(
      "kernel-shapes",
      "Write the distinct kernels that scenarios run as a measured-kernel table without times, for the device "
      "campaign to measure (calib/measurements/README.md)");
  sub->add_option("scenarios", o->scenarios, "scenario files")->required();
  sub->add_option("--preset", o->preset, "keep only scenarios on this hardware preset (others are named and skipped)");
  sub->add_option("-o,--output", o->output, "the table to write")->check(output_file())->required();
  add_scale_down_option(sub, o->scale_down);
  sub->callback([o, &action] { action = [o] { return run_shapes(*o); }; });
}

}  // namespace lacuna::cli
