// `lacuna calibrate`: measure the kernels (and, on GPUs, the NCCL
// collectives) a scenario runs and write a calibration profile for
// `lacuna simulate --calibration`. The steps, each in its own file:
// shapes.h (what the scenario runs), grid.h (what to measure),
// cpu_probe.h (CPU time estimates and the skip rule), bench_driver.h (Google
// Benchmark timing), nccl_collectives.h (collectives), device_query.h and
// profile_builder.h (the profile). docs/_draft_calibrate.md describes it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "calib/shapes.h"
#include "sim/proto/program.pb.h"

namespace lacuna::calibrate {

enum class DeviceChoice { kAuto, kCpu, kGpu };

struct CalibrateOptions {
  std::vector<std::string> scenarios;  // empty: the built-in family set of the device
  // The kernels a scenario runs, compiled in its own placement and scaled
  // down by the factor given. Set by the caller (the CLI:
  // tools/cli/scenario_shapes.h), so that calib/ does not depend on the
  // compiler and the placements above it.
  std::function<ShapeSet(const std::string& path, int64_t scale_down)> scenario_shapes;
  DeviceChoice device = DeviceChoice::kAuto;
  std::string output;
  int repetitions = 0;             // 0: the device's default (GPU 20, CPU 5)
  int warmup = -1;                 // -1: the device's default (GPU 5, CPU 1)
  double max_point_seconds = 0.5;  // CPU: skip points estimated slower than this
  bool grid = true;
  bool collectives = true;
  std::vector<ir::OpClass> only;   // empty: every class
  // --scale-down N: the scenarios (the default family set too) are scaled
  // before their shapes are taken, so the profile measures the kernels the
  // scaled program runs (docs/scenario.md#scale-down).
  int64_t scale_down = 1;
  // CPU: time each kernel while concurrency − 1 other threads run copies of
  // it (calib/concurrent_case.h); 1 = alone.
  int concurrency = 1;
};

// Parses "GEMM,attention" into op classes; throws lacuna::Error naming an unknown one.
std::vector<ir::OpClass> parse_op_classes(const std::string& list);

// The shipped scenario used as the default family set ("scenarios/cpu/..."),
// found relative to the working directory or the lacuna binary.
std::string find_shipped_file(const std::string& relative);
inline constexpr const char* kDefaultCpuScenario = "scenarios/cpu/tiny-mllm-cpu-8rank.pbtxt";
inline constexpr const char* kDefaultGpuScenario = "scenarios/mllm/optimus-vit22b-gpt175b-3072.pbtxt";

// Runs everything, prints the plan and summary on `out` and the device choice,
// progress and warnings on `err`, and writes the profile (atomically). Returns
// the exit code; user errors throw lacuna::Error.
int run_calibrate(const CalibrateOptions& options, std::FILE* out, std::FILE* err);

}  // namespace lacuna::calibrate
