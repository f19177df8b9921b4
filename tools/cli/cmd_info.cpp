// Informational commands: `lacuna presets`, `lacuna devices`, `lacuna version`.
#include <string>

#include <fmt/format.h>

#include "kernels/device_info.h"
#include "sim/scenario/scenario.h"
#include "tools/cli/commands.h"
#include "sim/core/version.h"

namespace lacuna::cli {

namespace {

int run_presets() {
  fmt::print("{:<16} {:<22} {:>11} {:>9} {:>10} {:>13} {:>16}\n", "preset", "GPU", "bf16 TFLOP/s", "HBM GiB",
             "HBM GB/s", "NVLink GB/s", "NIC GB/s");
  for (const std::string& name : scenario::hardware_preset_names()) {
    const scenario::Cluster& c = scenario::hardware_preset(name);
    const scenario::GpuSpec& g = c.gpu();
    fmt::print("{:<16} {:<22} {:>11.0f} {:>9.0f} {:>10.0f} {:>13.0f} {:>16}\n", name, g.name(), g.peak_bf16_tflops(),
               g.hbm_capacity_gib(), g.hbm_bandwidth_gb_per_s(), c.nvlink().bandwidth_gb_per_s(),
               fmt::format("{:.0f} × {}", c.nic().bandwidth_gb_per_s(), c.nics_per_node()));
  }
  fmt::print("\nBandwidths per direction; NIC: per NIC × NICs per node.\n");
  return 0;
}

int run_devices() {
  const kernels::DeviceReport r = kernels::query_devices();
  fmt::print("built with CUDA: {}\n", r.built_with_cuda ? "yes" : "no");
  if (r.gpus.empty()) {
    fmt::print("no usable GPU: {}\n", r.why_none);
    return 0;
  }
  for (const kernels::GpuInfo& g : r.gpus) {
    fmt::print("GPU {}: {} ({:.1f} GiB, {} SMs, compute capability {}.{})\n", g.index, g.name,
               static_cast<double>(g.memory_bytes) / (1024.0 * 1024.0 * 1024.0), g.sm_count,
               g.compute_capability_major, g.compute_capability_minor);
  }
  return 0;
}

}  // namespace

void add_presets_command(CLI::App& app, Action& action) {
  app.add_subcommand("presets", "List the built-in hardware presets")->callback([&action] { action = run_presets; });
}

void add_devices_command(CLI::App& app, Action& action) {
  app.add_subcommand("devices", "Report the GPUs this machine can use")->callback([&action] { action = run_devices; });
}

void add_version_command(CLI::App& app, Action& action) {
  app.add_subcommand("version", "Print the lacuna version")->callback([&action] {
    action = [] {
      fmt::print("lacuna {}\n", lacuna_version());
      return 0;
    };
  });
}

}  // namespace lacuna::cli
