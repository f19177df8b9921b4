// The lacuna subcommands. Each add_*_command registers its CLI11 subcommand;
// when the user picks it, `action` is set to the work to run, so main() can run
// it inside one error handler that maps failures to exit codes.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace lacuna::cli {

using Action = std::function<int()>;

void add_simulate_command(CLI::App& app, Action& action);
void add_compile_command(CLI::App& app, Action& action);
void add_compare_command(CLI::App& app, Action& action);
void add_diff_command(CLI::App& app, Action& action);
void add_execute_command(CLI::App& app, Action& action);
void add_check_command(CLI::App& app, Action& action);
void add_validate_command(CLI::App& app, Action& action);
void add_presets_command(CLI::App& app, Action& action);
void add_devices_command(CLI::App& app, Action& action);
void add_version_command(CLI::App& app, Action& action);
void add_calibrate_command(CLI::App& app, Action& action);
void add_ablate_command(CLI::App& app, Action& action);
void add_efficiency_command(CLI::App& app, Action& action);
void add_search_command(CLI::App& app, Action& action);
void add_sweep_command(CLI::App& app, Action& action);
void add_goodput_command(CLI::App& app, Action& action);
void add_import_command(CLI::App& app, Action& action);
void add_fit_kernels_command(CLI::App& app, Action& action);
void add_kernel_shapes_command(CLI::App& app, Action& action);

}  // namespace lacuna::cli
