// lacuna: predict large-scale LLM training from first principles.
// Exit codes: 0 ok; 2 user error (bad input, usage); 3 deadlocked program;
// 4 ranks over the HBM capacity under `simulate --strict-memory`
// (report::kExitOverCapacity); 70 internal error (a bug in lacuna).
#include <cerrno>
#include <cstdio>
#include <exception>
#include <system_error>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/core/interrupt_cleanup.h"
#include "sim/core/option_text.h"
#include "sim/engine/simulator.h"
#include "sim/parallel/processes.h"
#include "tools/cli/commands.h"

namespace {

int run(int argc, char** argv) {
  CLI::App app{"lacuna: simulate large-scale LLM training (TP/CP/PP/DP, pipeline schedules, bubbles)", "lacuna"};
  app.require_subcommand(0, 1);
  lacuna::cli::Action action;
  lacuna::cli::add_simulate_command(app, action);
  lacuna::cli::add_compare_command(app, action);
  lacuna::cli::add_execute_command(app, action);
  lacuna::cli::add_diff_command(app, action);
  lacuna::cli::add_compile_command(app, action);
  lacuna::cli::add_check_command(app, action);
  lacuna::cli::add_calibrate_command(app, action);
  lacuna::cli::add_ablate_command(app, action);
  lacuna::cli::add_validate_command(app, action);
  lacuna::cli::add_efficiency_command(app, action);
  lacuna::cli::add_fit_kernels_command(app, action);
  lacuna::cli::add_kernel_shapes_command(app, action);
  lacuna::cli::add_search_command(app, action);
  lacuna::cli::add_sweep_command(app, action);
  lacuna::cli::add_goodput_command(app, action);
  lacuna::cli::add_import_command(app, action);
  lacuna::cli::add_presets_command(app, action);
  lacuna::cli::add_devices_command(app, action);
  lacuna::cli::add_version_command(app, action);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version print and succeed; every other refusal of the
    // command line is a user error like any other: one "lacuna: error:" line.
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    fmt::print(stderr, "lacuna: error: {}\nRun with --help for more information.\n", e.what());
    return 2;
  }
  if (!action) {
    std::fputs(app.help().c_str(), stdout);
    return 2;
  }
  // Under mpirun, only the commands that split their work over the MPI
  // processes may run: any other would run K times and write the same files.
  const lacuna::parallel::World world = lacuna::parallel::world();
  if (lacuna::parallel::launched_by_mpi() && !lacuna::parallel::built_with_mpi()) {
    throw lacuna::Error(lacuna::SourceLocation{"mpirun", 0, 0, {}},
                        "started by an MPI launcher, but this lacuna was built without MPI: every process would "
                        "run the whole command and write the same files",
                        "run it without mpirun/srun, or build with MPI (libopenmpi-dev; cmake -DLACUNA_MPI=ON)");
  }
  if (world.size > 1) {
    const std::string name = app.get_subcommands().empty() ? "" : app.get_subcommands().front()->get_name();
    if (name != "search" && name != "sweep") {
      throw lacuna::Error(lacuna::SourceLocation{name, 0, 0, {}},
                          fmt::format("started as {} MPI processes, but only search and sweep split their work", world.size),
                          "run it without mpirun");
    }
  }
  return action();
}

}  // namespace

int run_and_report(int argc, char** argv);

int main(int argc, char** argv) {
  // MPI for the process's lifetime when started by mpirun (else nothing):
  // before any thread, and outliving every error path below.
  lacuna::parallel::MpiSession mpi(&argc, &argv);
  const int code = run_and_report(argc, argv);
  // A process that failed under mpirun takes the others down with it
  // (after printing why), instead of leaving them in a collective.
  if (code != 0) lacuna::parallel::abort_others(code);
  return code;
}

int run_and_report(int argc, char** argv) {
  // Partial outputs are removed if the run is interrupted (docs/outputs.md).
  lacuna::install_interrupt_cleanup();
  try {
    return run(argc, argv);
  } catch (const lacuna::engine::DeadlockError& e) {
    fmt::print(stderr, "lacuna: error: deadlock: {}\n", e.what());
    const auto& blocked = e.blocked();
    constexpr size_t kShown = 20;
    for (size_t i = 0; i < blocked.size() && i < kShown; ++i) {
      const auto& b = blocked[i];
      fmt::print(stderr, "  rank {} stream {} op {}: {}\n", b.rank, b.stream, b.op, b.description);
    }
    if (blocked.size() > kShown) fmt::print(stderr, "  ... and {} more blocked ops\n", blocked.size() - kShown);
    return 3;
  } catch (const lacuna::Error& e) {
    // The library points to options by reference; the CLI spells them as flags.
    fmt::print(stderr, "lacuna: error: {}\n", lacuna::spell_options(e.raw(), lacuna::cli_option));
    return 2;
  } catch (const std::system_error& e) {
    // A streaming writer (the trace) hitting a full disk or a closed pipe:
    // the machine's state, not a bug in lacuna.
    const int v = e.code().value();
    const bool io = e.code().category() == std::generic_category() || e.code().category() == std::system_category();
    if (io && (v == ENOSPC || v == EDQUOT || v == EFBIG || v == EIO || v == EPIPE)) {
      fmt::print(stderr, "lacuna: error: write failed: {}\n", e.what());
      return 2;
    }
    fmt::print(stderr, "lacuna: internal error: {}\n", e.what());
    return 70;
  } catch (const std::exception& e) {
    fmt::print(stderr, "lacuna: internal error: {}\n", e.what());
    return 70;
  }
}
