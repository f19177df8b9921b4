// `lacuna execute INPUT`: run the program for real (runtime/backend.h), then
// write the measured iteration in simulate's formats: the summary table, the
// Perfetto trace, the SVG and the JSON (with its per-op timeline, which
// `lacuna diff` compares with a prediction). docs/executor.md.
#include <algorithm>
#include <chrono>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>


#include <fmt/format.h>

#include "runtime/backend.h"
#include "runtime/observe.h"
#include "runtime/replay.h"
#include "sim/core/error.h"
#include "sim/core/input_file.h"
#include "sim/engine/simulator.h"
#include "sim/report/observers/bubble_accounting.h"
#include "sim/report/observers/comm_accounting.h"
#include "sim/report/formats/format.h"
#include "sim/report/analyses/rank_spec.h"
#include "sim/report/formats/span_trace.h"
#include "sim/report/analyses/summary.h"
#include "sim/report/formats/terminal_report.h"
#include "sim/run/program_input.h"
#include "sim/run/run_estimate.h"
#include "sim/run/single_run.h"
#include "tools/cli/calibration_option.h"
#include "tools/cli/commands.h"
#include "tools/cli/network_option.h"
#include "tools/cli/output_checks.h"
#include "tools/cli/run_outputs.h"
#include "tools/cli/scale_down_option.h"

namespace lacuna::cli {

namespace {

struct ExecuteCliOptions {
  std::string input;
  std::string backend = "cpu";
  std::string ranks = "all";
  int iterations = 3;
  int warmup = 1;
  double timeout_s = 60;
  bool replay = false;
  std::string replay_from;  // a saved prediction (simulate --spans)
  int compute_slots = -1;  // -1: the CPU backend's default, the hardware threads
  uint64_t seed = 1;
  int64_t scale_down = 1;
  double max_host_memory_gb = -1;  // -1: 80 % of this machine's memory
  NetworkMode network = NetworkMode::kFlow;
  CalibrationOption calibration;
  OutputOptions outputs;
};

// The prediction the replay emulates peers from: a simulation of the same
// program with the same cost and network models as `lacuna simulate`.
runtime::ReplayTimes predict_for_replay(const ir::Program& program, const cost::CostModel& cost, NetworkMode mode,
                                        const std::vector<int>& ranks) {
  runtime::ReplayTimes times;
  runtime::ReplayRecorder recorder(times, ranks);
  engine::Observer* observers[] = {&recorder};
  (void)run::simulate(program, cost, mode, engine::SimulationOptions{}, observers);
  return times;
}

// The same from a prediction saved by `lacuna simulate --spans FILE`.
runtime::ReplayTimes load_replay_prediction(const ir::Program& program, const std::string& path,
                                            const std::vector<int>& ranks) {
  const std::string bytes = read_input_file(path, kSpanTraceInput);
  if (!report::looks_like_span_trace(bytes)) {
    throw Error(SourceLocation{path, 0, 0, "--replay-from"}, "a JSON file: --replay-from reads a span trace",
                "save the prediction with `lacuna simulate INPUT --spans FILE`");
  }
  return runtime::replay_times_from_trace(program, report::parse_span_trace(bytes, path), ranks, path);
}

// The measured iteration the outputs describe: the median by wall time of
// the iterations after the warm-up (the lower median; the earliest on ties).
int representative_iteration(const std::vector<int64_t>& iteration_ns, int warmup) {
  std::vector<int> measured(iteration_ns.size() - static_cast<size_t>(warmup));
  std::iota(measured.begin(), measured.end(), warmup);
  std::stable_sort(measured.begin(), measured.end(), [&](int a, int b) {
    return iteration_ns[static_cast<size_t>(a)] < iteration_ns[static_cast<size_t>(b)];
  });
  return measured[(measured.size() - 1) / 2];
}

std::string iteration_list(const std::vector<int64_t>& iteration_ns, int warmup, int chosen) {
  std::string out;
  for (size_t i = static_cast<size_t>(warmup); i < iteration_ns.size(); ++i) {
    if (!out.empty()) out += ", ";
    out += report::format_duration(TimeNs(iteration_ns[i]));
    if (static_cast<int>(i) == chosen) out += " (median)";
  }
  return out;
}

int run_execute(const ExecuteCliOptions& o) {
  if (o.iterations < 1) throw Error(SourceLocation{{}, 0, 0, "--iterations"}, "must be >= 1");
  if (o.warmup < 0) throw Error(SourceLocation{{}, 0, 0, "--warmup"}, "must be >= 0");
  if (!(o.timeout_s > 0) || o.timeout_s > 1e6) {
    throw Error(SourceLocation{{}, 0, 0, "--timeout-s"}, "must be > 0 and at most 1e6 s, got " + fmt::format("{}", o.timeout_s));
  }

  // The same program `lacuna simulate INPUT` with these options simulates:
  // placements plan with the same (calibrated or analytic) cost model.
  const std::vector<NamedPath> inputs = {
      {"INPUT", o.input}, {"--calibration", o.calibration.profile}, {"--replay-from", o.replay_from}};
  check_outputs(explicit_outputs(o.outputs), inputs);  // before the load and compile
  const run::SimulationInput input = run::load_simulation_input(o.input, o.calibration, o.scale_down);
  const ir::Program& program = input.program;
  // The selection grammar is --trace-ranks's; an error names this option.
  std::vector<int> ranks;
  try {
    for (int32_t r : report::select_ranks(report::parse_rank_spec(o.ranks, "--ranks"), program)) ranks.push_back(r);
  } catch (const Error& e) {
    throw Error(SourceLocation{{}, 0, 0, "--ranks"}, e.problem(), e.fix());
  }
  std::sort(ranks.begin(), ranks.end());

  std::unique_ptr<runtime::Backend> backend = runtime::make_backend(o.backend);
  // Before the run: the CUDA backend asks a forked child, which must not
  // inherit a CUDA context from this process.
  const std::string device = backend->device_description();

  std::optional<runtime::ReplayTimes> replay;
  if (!o.replay_from.empty()) {
    replay = load_replay_prediction(program, o.replay_from, ranks);
  } else if (o.replay) {
    replay = predict_for_replay(program, *input.cost, o.network, ranks);
  }

  // Under mpirun only world rank 0 writes outputs (it gathers every rank's spans).
  const bool primary = backend->primary_process();
  RunOutputs outputs(program, o.outputs, run::file_stem_for(program.info().scenario_name(), o.input), ".measured",
                     trace::MEASUREMENT, primary, {}, inputs);

  runtime::ExecuteOptions eo;
  eo.iterations = o.warmup + o.iterations;
  eo.keep_all_iterations = true;
  eo.timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000));
  eo.ranks = ranks;
  eo.seed = o.seed;
  // The CPU backend defaults to one compute slot per hardware thread.
  const int hardware_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  eo.compute_slots = o.compute_slots >= 0 ? o.compute_slots : backend->name() == "cpu" ? hardware_threads : 0;
  eo.replay = replay ? &*replay : nullptr;
  // The CPU backend holds everything in host memory; the CUDA backend holds
  // the recorded spans there, and bounds its device memory per rank itself.
  eo.max_memory_bytes = run::memory_limit_from_gb(o.max_host_memory_gb).count();
  // Executed rank subsets without --replay are checked by the plan (every
  // peer and group member must run).

  const auto t0 = std::chrono::steady_clock::now();
  const runtime::ExecutionResult result = backend->execute(program, eo);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (result.iteration_ns.size() != static_cast<size_t>(eo.iterations)) {
    throw Error("execute: the backend reported " + std::to_string(result.iteration_ns.size()) + " iterations, expected " +
                std::to_string(eo.iterations));
  }
  const int chosen = representative_iteration(result.iteration_ns, o.warmup);
  if (!primary) {
    fmt::print("execute: {} ops measured on this process; world rank 0 writes the outputs\n", result.spans.size());
    return 0;
  }

  report::BubbleAccounting accounting;
  report::CommAccounting comm;
  std::vector<engine::Observer*> observers{&accounting, &comm};
  for (engine::Observer* observer : outputs.observers()) observers.push_back(observer);
  runtime::feed_observers(program, result, chosen, observers);

  const std::string measured =
      fmt::format("measured: {} backend ({}); iteration {} of {}, the median after {} warm-up", backend->name(),
                  device, chosen - o.warmup + 1, o.iterations, o.warmup);
  report::Summary summary = report::summarize(program, accounting, measured, false);
  summary.comm = report::summarize_comm(comm);
  // No per-link figures: a measured run has no network model.
  outputs.commit(summary);

  size_t ops = 0;
  for (const auto& s : result.spans) ops += s.iteration == chosen ? 1 : 0;
  report::RunStats stats;
  stats.wall_seconds = wall;
  stats.events = static_cast<uint64_t>(result.spans.size());
  stats.label = "execution";
  stats.unit = "ops";
  stats.mode = ranks.size() == static_cast<size_t>(program.ranks_size())
                   ? fmt::format("executed: all {} ranks", program.ranks_size())
                   : fmt::format("executed: {} of {} ranks{}", ranks.size(), program.ranks_size(),
                                 replay ? fmt::format(" (replay: {} ops per iteration emulated from the prediction, "
                                                      "predicted iteration {})",
                                                      result.emulated_ops,
                                                      report::format_duration(TimeNs(replay->iteration_ns)))
                                        : std::string());
  fmt::print("{}", report::format_summary(summary, stats));
  fmt::print("  {:<24} {}\n", "iterations", iteration_list(result.iteration_ns, o.warmup, chosen));
  fmt::print("  {:<24} {} per iteration\n", "ops executed", ops);
  fmt::print("{}", outputs.describe());
  return 0;
}

}  // namespace

void add_execute_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<ExecuteCliOptions>();
  CLI::App* sub =
      app.add_subcommand("execute", "Run the program for real (CPU threads or CUDA/NCCL) and write the measured timeline");
  sub->add_option("INPUT", o->input, "scenario (.pbtxt, .textproto, .json) or program from `lacuna compile` (.pb)")
      ->required();
  sub->add_option("--backend", o->backend, "cpu (threads, reference kernels) or cuda (GPUs, NCCL)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  sub->add_option("--ranks", o->ranks,
                  "ranks to execute: all (default), a list like 0-3,6, pipeline or stage:N; a subset needs --replay "
                  "unless it is closed under its groups and peers")
      ->capture_default_str();
  sub->add_option("--iterations", o->iterations, "measured iterations (the outputs show the median one)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  sub->add_option("--warmup", o->warmup, "iterations run first and not measured")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  sub->add_option("--timeout-s", o->timeout_s,
                  "a wait for a peer or an event longer than this fails with a report of who waits on what")
      ->capture_default_str();
  sub->add_flag("--replay", o->replay,
                "emulate the ranks not executed from a simulation of the same program (docs/executor.md#replay)");
  sub->add_option("--replay-from", o->replay_from,
                  "replay (--replay) from a prediction saved by `lacuna simulate --spans FILE` instead of simulating "
                  "again; it must be of this program and trace the executed ranks");
  sub->add_option("--compute-slots", o->compute_slots,
                  "cpu backend: at most N compute kernels at once (default: the hardware threads; 0: no limit); "
                  "a kernel waiting for a core shows as idle time, not kernel time")
      ->check(CLI::Range(0, 1 << 20));
  sub->add_option("--seed", o->seed, "seed of the kernels' random inputs")->capture_default_str();
  sub->add_option("--max-host-memory-gb", o->max_host_memory_gb,
                  "refuse before allocating when the run's estimated host memory exceeds this (cpu backend: kernel "
                  "and transfer buffers and recorded spans; cuda backend: recorded spans) (default: 80 % of this "
                  "machine's memory; 0: no limit)")
      ->check(CLI::Range(0.0, 1e9));
  add_scale_down_option(sub, o->scale_down);
  add_network_option(sub, o->network);
  add_calibration_options(sub, o->calibration);
  add_output_options(sub, o->outputs, ".measured");
  sub->callback([o, &action] { action = [o] { return run_execute(*o); }; });
}

}  // namespace lacuna::cli
