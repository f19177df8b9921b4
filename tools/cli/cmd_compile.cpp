// `lacuna compile SCENARIO -o FILE`: the IR every rank runs, binary or text.
#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <google/protobuf/text_format.h>

#include "sim/compiler/custom_schedule.h"
#include "sim/core/atomic_file.h"
#include "sim/core/error.h"
#include "sim/ir/digest.h"
#include "sim/placement/compile.h"
#include "sim/placement/schedule_actions.h"
#include "sim/report/formats/format.h"
#include "sim/report/formats/names.h"
#include "sim/run/program_input.h"
#include "sim/run/simulation_input.h"
#include "sim/scenario/scenario.h"
#include "tools/cli/commands.h"
#include "tools/cli/output_checks.h"
#include "tools/cli/scale_down_option.h"

namespace lacuna::cli {

namespace {

struct CompileOptions {
  std::string scenario;
  std::string output;
  std::string dump_schedule;
  std::string generate;
  bool with_p2p = false;
  bool with_dp = false;
  bool with_amax = false;
  bool text = false;
  int64_t scale_down = 1;
};

struct OpCounts {
  int64_t compute = 0, collective = 0, p2p = 0, events = 0;
  int64_t total() const { return compute + collective + p2p + events; }
};

OpCounts count_ops(const ir::RankClass& cls) {
  OpCounts c;
  for (const ir::Stream& s : cls.streams()) {
    for (const ir::Op& op : s.ops()) {
      if (op.has_compute()) ++c.compute;
      else if (op.has_collective()) ++c.collective;
      else if (op.has_send() || op.has_recv()) ++c.p2p;
      else ++c.events;
    }
  }
  return c;
}

// The schedule's actions (sim/schedule/action.h): the text form, or
// PyTorch's CSV for a .csv path.
void dump_schedule(const scenario::LoadedScenario& loaded, const std::string& path, bool with_p2p, bool with_dp,
                   bool with_amax, const std::string& generate) {
  // ZB-V weighs passes by lacuna's own times (the analytic cost model).
  std::unique_ptr<cost::CostModel> cost;
  if (generate == "zb-v")
    cost = run::make_cost_model({}, loaded.spec.cluster(), loaded.spec.training().precision(), loaded.path);
  compiler::PassTimes times;
  std::vector<std::string> lanes;
  const schedule::ActionSchedule actions =
      generate.empty() ? placement::schedule_actions(loaded, with_p2p, &lanes, with_dp, with_amax)
                       : compiler::generate_schedule(loaded, generate, "--generate", cost.get(), &times);
  const bool csv = std::filesystem::path(path).extension() == ".csv";
  std::string text;
  if (!csv && times.stages > 0)
    text = fmt::format("# pass costs (lacuna's analytic model, mean of one microbatch over {} stages): F {}, I {}, "
                       "W {}, p2p {}\n",
                       times.stages, report::format_duration(times.forward),
                       report::format_duration(times.backward_input), report::format_duration(times.backward_weight),
                       report::format_duration(times.p2p));
  if (!csv && !lanes.empty()) {
    text += fmt::format("# {}: the compiled program read back, one line per rank class: every module's compute "
                        "passes in the order the class runs them, a pass cut by other kernels as kernel ranges "
                        "(docs/schedules.md#reading-a-program-back)\n",
                        loaded.path);
    for (size_t k = 0; k < lanes.size(); ++k) text += fmt::format("# line {}: {}\n", k, lanes[k]);
  } else if (!csv) {
    text += fmt::format("# {}: {}pipeline actions, one line per pipeline rank (docs/schedules.md){}\n", loaded.path,
                       generate.empty() ? ""
                       : generate.starts_with("1f1b")
                           ? generate + " (Megatron-LM's 1F1B order with the microbatches in flight asked for; it "
                                        "runs with blocking or overlapped execution.pipeline_p2p) "
                           : generate + " (run it with execution.pipeline_p2p: P2P_OVERLAPPED, "
                                        "as its authors' runtime posts transfers ahead) ",
                       std::string(with_p2p ? "; sends and receives as blocking calls ('+' joins one batched call), "
                                              "which execution.pipeline_p2p: P2P_OVERLAPPED replaces by overlapped "
                                              "transfers"
                                            : "") +
                           (with_dp ? "; each stage's parameter gather (UNSHARD) and gradient reduction "
                                      "(REDUCE_GRAD) where the DP pass places them (docs/schedules.md#the-dp-pass)"
                                    : "") +
                           (with_amax ? "; FP8 delayed scaling's amax reduction (AMAX) after each pass that runs "
                                        "one, as the amax pass places them (docs/schedules.md#the-amax-pass)"
                                      : ""));
  }
  text += csv ? schedule::format_csv(actions) : schedule::format_schedule(actions);
  write_file_atomically(path, text);
  size_t n = 0;
  for (const auto& r : actions) n += r.size();
  fmt::print("{}: {} actions on {} {} ({} form)\n", path, n, actions.size(),
             lanes.empty() ? "pipeline ranks" : "rank classes", csv ? "CSV" : "text");
}

int run_compile(const CompileOptions& o) {
  if (o.output.empty() && o.dump_schedule.empty())
    throw Error(SourceLocation{{}, 0, 0, "--output"}, "nothing to write",
                "give -o FILE for the program, --dump-schedule FILE for the schedule's actions, or both");
  check_outputs({{"--output", o.output}, {"--dump-schedule", o.dump_schedule}}, {{"SCENARIO", o.scenario}});
  const scenario::LoadedScenario loaded = scenario::load_scenario(o.scenario, o.scale_down);
  if (!o.generate.empty() && (o.dump_schedule.empty() || o.with_p2p || o.with_dp || o.with_amax))
    throw Error(SourceLocation{{}, 0, 0, "--generate"},
                "--generate writes a schedule for --dump-schedule, without --with-p2p, --with-dp or --with-amax",
                "add --dump-schedule FILE; the p2p, DP and amax passes place a generated schedule's communication "
                "when it runs");
  if (o.with_p2p && o.dump_schedule.empty())
    throw Error(SourceLocation{{}, 0, 0, "--with-p2p"}, "--with-p2p shapes --dump-schedule's output",
                "add --dump-schedule FILE");
  if (o.with_dp && o.dump_schedule.empty())
    throw Error(SourceLocation{{}, 0, 0, "--with-dp"}, "--with-dp shapes --dump-schedule's output",
                "add --dump-schedule FILE");
  if (o.with_amax && o.dump_schedule.empty())
    throw Error(SourceLocation{{}, 0, 0, "--with-amax"}, "--with-amax shapes --dump-schedule's output",
                "add --dump-schedule FILE");
  if (!o.dump_schedule.empty())
    dump_schedule(loaded, o.dump_schedule, o.with_p2p, o.with_dp, o.with_amax, o.generate);
  if (o.output.empty()) return 0;
  ir::Program program = placement::compile(loaded);
  // The resolved variability travels with the program (docs/variability.md),
  // so that `simulate FILE.pb` runs the cluster the scenario describes.
  run::attach_variability(program, loaded);
  ir::stamp_content_digest(program);
  std::string bytes;
  if (o.text) {
    if (!google::protobuf::TextFormat::PrintToString(program, &bytes)) {
      throw InternalError("internal: could not print the program in text format");
    }
  } else if (!ir::serialize_deterministically(program, &bytes)) {
    throw Error(SourceLocation{o.output, 0, 0, {}}, "program too large to serialize (protobuf limit is 2 GiB)",
                "use `lacuna simulate` on the scenario directly");
  }
  write_file_atomically(o.output, bytes);

  std::map<int32_t, int64_t> bound;
  for (const ir::RankBinding& b : program.ranks()) ++bound[b.class_id()];
  int64_t total_ops = 0;
  for (const ir::RankClass& cls : program.classes()) total_ops += count_ops(cls).total();
  fmt::print("{}: {} ({} format, {} bytes)\n", o.output, program.info().scenario_name(), o.text ? "text" : "binary",
             bytes.size());
  if (program.info().scale_down() > 1)
    fmt::print("  scaled down {}x: hidden sizes and sequence lengths / {} (docs/scenario.md#scale-down)\n",
               program.info().scale_down(), program.info().scale_down());
  fmt::print("  ranks   {}\n  classes {} ({} ops in all)\n  groups  {}\n  digest  {}\n", program.ranks_size(),
             program.classes_size(), total_ops, program.groups_size(), program.info().content_digest());
  if (!program.info().planning_cost_model().empty())
    fmt::print("  planned with cost model: {}\n", program.info().planning_cost_model());
  if (program.info().modules_size() > 0) {
    std::string modules;
    for (const ir::ModuleInfo& m : program.info().modules()) {
      modules += fmt::format("{}{} (ranks {}–{})", modules.empty() ? "" : ", ", m.name(), m.first_rank(),
                             m.first_rank() + m.num_ranks() - 1);
    }
    fmt::print("  placement {}: {}\n", report::placement_name(program.info().placement()), modules);
  }
  constexpr int kShown = 24;
  for (int i = 0; i < program.classes_size() && i < kShown; ++i) {
    const ir::RankClass& cls = program.classes(i);
    const OpCounts c = count_ops(cls);
    fmt::print("    {:<24} {:>6} ranks  {:>8} ops (compute {}, collective {}, p2p {}, event {})\n", cls.name(),
               bound[i], c.total(), c.compute, c.collective, c.p2p, c.events);
  }
  if (program.classes_size() > kShown) fmt::print("    ... and {} more classes\n", program.classes_size() - kShown);
  fmt::print("  file size {:.2f} MB\n", static_cast<double>(bytes.size()) / 1e6);
  return 0;
}

}  // namespace

void add_compile_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<CompileOptions>();
  CLI::App* sub = app.add_subcommand("compile", "Compile a scenario into the per-rank program IR");
  sub->add_option("SCENARIO", o->scenario, "scenario file (.pbtxt, .textproto, .json)")->required();
  sub->add_option("-o,--output", o->output, "program file to write (binary ir::Program; text with --text)")
      ->check(output_file());
  sub->add_option("--dump-schedule", o->dump_schedule,
                  "write the schedule as actions (PyTorch's CSV for a .csv path): the pipeline's, one line per "
                  "rank, a start for schedule.actions_file; for Optimus and the heterogeneous placements the "
                  "compiled program read back, one line per rank class (docs/schedules.md)")
      ->check(output_file());
  sub->add_flag("--with-p2p", o->with_p2p,
                "with --dump-schedule: write the pipeline's blocking sends and receives too (SEND_F, RECV_B, ...; "
                "'+' joins one batched call), as the p2p pass places them");
  sub->add_flag("--with-dp", o->with_dp,
                "with --dump-schedule: write each stage's data-parallel actions too (UNSHARD, the parameter gather "
                "of the distributed optimizer; REDUCE_GRAD, the gradient reduction), as the DP pass places them");
  sub->add_flag("--with-amax", o->with_amax,
                "with --dump-schedule: write FP8 delayed scaling's amax reductions too (AMAX, after each forward, "
                "backward and input-gradient pass), as the amax pass places them; drop one from the file and that "
                "pass runs none");
  sub->add_option("--generate", o->generate,
                  "with --dump-schedule: write a generated schedule for the scenario's pipeline instead of its own: "
                  "zb-v (ZB-V, the V-shaped zero-bubble schedule, weighed by lacuna's own pass times), dualpipev "
                  "(DeepSeek-V3's DualPipe cut in half, its forward-backward pairs written F&B) or dualpipe (the "
                  "bidirectional original: two pipelines in opposite directions, each stage held twice; even pp), "
                  "which need virtual_stages 2, looped-bfs (breadth-first: every microbatch through a chunk "
                  "before the next, as PyTorch's ScheduleLoopedBFS; any virtual_stages), or 1f1b (Megatron-LM's "
                  "1F1B; 1f1b:K holds at most K microbatches in flight on every rank, 1f1b:k0,k1,... one count "
                  "per pipeline rank, not growing downstream; virtual_stages 1)")
      ->check(CLI::Validator(
          [](const std::string& spec) -> std::string {
            // The generator's name, before any argument ("1f1b:2").
            const std::string name = spec.substr(0, spec.find(':'));
            const auto& names = compiler::schedule_generators();
            if (std::find(names.begin(), names.end(), name) != names.end()) return {};
            return fmt::format("{} is not a schedule generator; use {}", name, fmt::join(names, ", "));
          },
          "GENERATOR[:ARG]"));
  sub->add_flag("--text", o->text, "write protobuf text format instead of binary");
  add_scale_down_option(sub, o->scale_down);
  sub->callback([o, &action] { action = [o] { return run_compile(*o); }; });
}

}  // namespace lacuna::cli
