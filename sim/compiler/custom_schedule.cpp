#include "sim/compiler/custom_schedule.h"

#include <algorithm>
#include <charconv>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sim/compiler/compile.h"
#include "sim/compiler/pass_times.h"
#include "sim/compiler/segment_inputs.h"
#include "sim/core/error.h"
#include "sim/core/input_file.h"
#include "sim/model/fp8.h"
#include "sim/scenario/execution.h"
#include "sim/schedule/call_deadlock.h"
#include "sim/schedule/dualpipe.h"
#include "sim/schedule/dualpipev.h"
#include "sim/schedule/in_flight_1f1b.h"
#include "sim/schedule/lower_amax.h"
#include "sim/schedule/looped_bfs.h"
#include "sim/schedule/lower_p2p.h"
#include "sim/schedule/lower_recompute.h"
#include "sim/schedule/validate_actions.h"
#include "sim/schedule/zbv.h"

namespace lacuna::compiler {
namespace {

// A schedule of 100,000 steps on 1,024 ranks is ~1 GB of text; real ones are
// kilobytes (docs/reliability.md#inputs).
constexpr InputKind kActionsInput{"schedule actions file", 64 * kMiB,
                                  "give a schedule in the action IR's text form or CSV (docs/schedules.md)"};

}  // namespace

std::string actions_file_path(const scenario::LoadedScenario& scenario) {
  const std::filesystem::path file = scenario.spec.schedule().actions_file();
  if (file.is_absolute() || scenario.path.empty()) return file.string();
  return (std::filesystem::path(scenario.path).parent_path() / file).lexically_normal().string();
}

namespace {

// Whether the scenario's pipeline p2p runs as blocking calls.
bool blocking_p2p(const scenario::LoadedScenario& scenario) {
  return scenario::resolve_execution(scenario.spec, scenario.locations).pipeline_p2p() == scenario::P2P_BLOCKING;
}

// The scenario's parallel.recompute by name (schedule/lower_recompute.h).
std::string recompute_name(const scenario::LoadedScenario& scenario) {
  return scenario::Recompute_Name(scenario.spec.parallel().recompute());
}

// Reads, parses and checks the file against `checks`; `shape` gets the stage
// layout its actions follow (looped, V or bidirectional).
// What a schedule file is checked against: the scenario's settings that
// decide which actions it may hold and where.
struct FileChecks {
  schedule::DpSettings dp;
  bool blocking = false;    // blocking p2p calls, which must not deadlock (schedule/call_deadlock.h)
  std::string recompute;    // parallel.recompute, which R actions need to be full
  bool amax_reduces = false;  // FP8 delayed scaling reduces amaxes (AMAX actions, schedule/lower_amax.h)
};

FileChecks file_checks(const scenario::LoadedScenario& scenario) {
  FileChecks c;
  c.dp = scenario_dp_settings(scenario);
  c.blocking = blocking_p2p(scenario);
  c.recompute = recompute_name(scenario);
  c.amax_reduces = model::fp8_delayed_amax_reduction(model::fp8_plan(scenario.spec));
  return c;
}

schedule::ActionSchedule read_actions(const std::string& path, schedule::PipelineShape& shape,
                                      const FileChecks& checks, const SourceLocation& named_by) {
  std::string text;
  try {
    text = read_input_file(path, kActionsInput);
  } catch (const Error& e) {
    throw Error(named_by, e.problem(), e.fix());
  }
  if (starts_with_utf8_bom(text))
    throw Error(SourceLocation{path, 1, 1, "schedule"}, "the file starts with a UTF-8 byte-order mark",
                "save it without the mark (plain UTF-8)");
  schedule::ActionSchedule actions = schedule::parse_schedule(text, path);
  if (static_cast<int32_t>(actions.size()) == shape.pp) shape.layout = schedule::infer_layout(actions, shape, path);
  schedule::validate_actions(actions, shape, path);
  schedule::check_recompute_actions(actions, checks.recompute, path);
  const auto passes = schedule::to_schedule(actions, shape, path);  // what the builder's form cannot hold
  // Written-out transfers, each where it belongs; under blocking p2p, the
  // calls the compiler will issue (those, or the generic rule's), run to
  // the end.
  const bool written = schedule::has_p2p_actions(actions);
  const bool run_calls = checks.blocking && shape.pp > 1;
  if (written || run_calls) {
    std::vector<std::vector<schedule::P2pCall>> calls;
    for (int32_t r = 0; r < shape.pp; ++r)
      calls.push_back(written ? schedule::p2p_calls_of(actions, r, shape, path)
                              : schedule::blocking_p2p_calls(scenario::CUSTOM, shape, r, passes[static_cast<size_t>(r)]));
    if (run_calls) schedule::check_blocking_calls(actions, shape, calls, path);
  }
  if (schedule::has_dp_actions(actions))  // the data-parallel actions
    for (int32_t r = 0; r < shape.pp; ++r) schedule::dp_points_of(actions, r, shape, checks.dp, path);
  if (schedule::has_amax_actions(actions))  // and FP8's amax reductions
    for (int32_t r = 0; r < shape.pp; ++r) schedule::amax_passes_of(actions, r, checks.amax_reduces, path);
  return actions;
}

}  // namespace

schedule::DpSettings scenario_dp_settings(const scenario::LoadedScenario& scenario) {
  const auto& par = scenario.spec.parallel();
  const PipelinePlan plan = pipeline_plan(scenario);
  schedule::DpSettings s;
  s.reduce = static_cast<int64_t>(plan.dims.dp) * plan.dims.cp > 1;
  s.unshard = s.reduce && par.distributed_optimizer();
  s.overlap_reduce = par.overlap_grad_reduce();
  s.overlap_gather = par.overlap_param_gather();
  return s;
}

CustomSchedule load_custom_schedule(const scenario::LoadedScenario& scenario, schedule::PipelineShape& shape) {
  const std::string path = actions_file_path(scenario);
  const FileChecks checks = file_checks(scenario);
  const schedule::ActionSchedule actions =
      read_actions(path, shape, checks, scenario.locations.locate("schedule.actions_file"));
  CustomSchedule out;
  out.passes = schedule::to_schedule(actions, shape, path);
  out.overlapped_pairs = schedule::overlapped_pairs(actions);
  if (schedule::has_p2p_actions(actions)) {
    out.p2p_calls.emplace();
    for (int32_t r = 0; r < shape.pp; ++r) out.p2p_calls->push_back(schedule::p2p_calls_of(actions, r, shape, path));
  }
  if (schedule::has_dp_actions(actions)) {
    out.dp_points.emplace();
    for (int32_t r = 0; r < shape.pp; ++r)
      out.dp_points->push_back(schedule::dp_points_of(actions, r, shape, checks.dp, path));
  }
  if (schedule::has_amax_actions(actions)) {
    out.amax_passes.emplace();
    for (int32_t r = 0; r < shape.pp; ++r)
      out.amax_passes->push_back(schedule::amax_passes_of(actions, r, checks.amax_reduces, path));
  }
  return out;
}

schedule::PipelineShape scenario_pipeline_shape(const scenario::LoadedScenario& scenario) {
  const PipelinePlan plan = pipeline_plan(scenario);
  const int64_t v = scenario.spec.parallel().virtual_stages();
  schedule::PipelineShape shape;
  shape.pp = static_cast<int32_t>(plan.dims.pp);
  shape.virtual_stages = v > 0 ? static_cast<int32_t>(v) : 1;
  shape.microbatches = plan.microbatches;
  if (shape.virtual_stages > 1)
    shape.microbatch_group = static_cast<int32_t>(scenario.spec.parallel().microbatch_group_size_per_vp_stage());
  return shape;
}

schedule::ActionSchedule scenario_actions(const scenario::LoadedScenario& scenario,
                                          schedule::PipelineShape* shape_out) {
  if (scenario.spec.model().encoders_size() > 0)
    throw Error(scenario.locations.locate("model.encoders"),
                "the placements of encoders do not emit the action IR yet; only an LLM's pipeline schedule can be "
                "written as actions",
                "dump the schedule of the scenario without its encoders");
  schedule::PipelineShape shape = scenario_pipeline_shape(scenario);
  const auto kind = scenario.spec.schedule().kind();
  schedule::ActionSchedule actions =
      kind == scenario::CUSTOM
          ? read_actions(actions_file_path(scenario), shape, file_checks(scenario),
                         scenario.locations.locate("schedule.actions_file"))
          : schedule::to_actions(schedule::build_schedule(kind, shape), shape);
  if (shape_out != nullptr) *shape_out = shape;
  return actions;
}

schedule::ActionSchedule check_actions_file(const scenario::LoadedScenario& scenario, const std::string& path,
                                            const std::string& option, schedule::PipelineShape* shape_out) {
  schedule::PipelineShape shape = scenario_pipeline_shape(scenario);
  schedule::ActionSchedule actions =
      read_actions(path, shape, file_checks(scenario), SourceLocation{path, 0, 0, option});
  if (shape_out != nullptr) *shape_out = shape;
  return actions;
}

const std::vector<std::string>& schedule_generators() {
  static const std::vector<std::string> names{"zb-v", "dualpipev", "dualpipe", "looped-bfs", "1f1b"};
  return names;
}

namespace {

// "1f1b", "1f1b:K" or "1f1b:k0,k1,...": the in-flight counts it asks for
// (schedule::in_flight_1f1b_schedule), Megatron-LM's without an argument, each
// capped at K with one count, exactly these with one per rank.
std::vector<int32_t> in_flight_counts(const std::string& argument, const schedule::PipelineShape& shape,
                                      const std::string& option) {
  std::vector<int32_t> k = schedule::megatron_1f1b_in_flight(shape.pp, shape.microbatches);
  if (argument.empty()) return k;
  std::vector<int32_t> given;
  size_t at = 0;
  while (at <= argument.size()) {
    const size_t comma = std::min(argument.find(',', at), argument.size());
    const std::string token = argument.substr(at, comma - at);
    int32_t value = 0;
    const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
    if (token.empty() || ec != std::errc() || end != token.data() + token.size())
      throw Error(SourceLocation{{}, 0, 0, option},
                  "1f1b's in-flight count \"" + token + "\" is not a whole number",
                  "write 1f1b:K for at most K microbatches in flight on every rank, or 1f1b:k0,k1,... with one "
                  "count per pipeline rank");
    given.push_back(value);
    at = comma + 1;
  }
  if (given.size() == 1) {
    if (given[0] < 1)
      throw Error(SourceLocation{{}, 0, 0, option},
                  fmt::format("1f1b's in-flight cap is {}, but a rank holds at least one microbatch", given[0]),
                  "give a cap of 1 or more");
    for (int32_t& c : k) c = std::min(c, given[0]);
    return k;
  }
  return given;
}

}  // namespace

schedule::ActionSchedule generate_schedule(const scenario::LoadedScenario& scenario, const std::string& spec,
                                           const std::string& option, const cost::CostModel* cost,
                                           PassTimes* times) {
  const auto& names = schedule_generators();
  // A generator's argument follows a colon ("1f1b:3,2,2,1").
  const size_t colon = std::min(spec.find(':'), spec.size());
  const std::string name = spec.substr(0, colon);
  const std::string argument = colon < spec.size() ? spec.substr(colon + 1) : "";
  if (std::find(names.begin(), names.end(), name) == names.end())
    throw Error(SourceLocation{{}, 0, 0, option}, "no schedule generator \"" + name + "\"",
                "use " + fmt::format("{}", fmt::join(names, " or ")));
  if (colon < spec.size() && name != "1f1b")
    throw Error(SourceLocation{{}, 0, 0, option}, "schedule generator \"" + name + "\" takes no argument",
                "write " + name);
  const std::string title = name == "zb-v"         ? "ZB-V"
                            : name == "dualpipe"   ? "DualPipe"
                            : name == "looped-bfs" ? "Looped BFS"
                            : name == "1f1b"       ? "1F1B"
                                                   : "DualPipeV";
  if (scenario.spec.model().encoders_size() > 0)
    throw Error(scenario.locations.locate("model.encoders"),
                "a generated schedule orders the LLM's pipeline; placements of encoders build their own",
                "generate it for the scenario without its encoders");
  const schedule::PipelineShape shape = scenario_pipeline_shape(scenario);
  // Breadth first over any number of chunks, in Megatron-LM's looped layout.
  if (name == "looped-bfs") return schedule::looped_bfs_schedule(shape.pp, shape.virtual_stages, shape.microbatches);
  if (name == "1f1b") {
    if (shape.virtual_stages != 1)
      throw Error(scenario.locations.locate("parallel.virtual_stages"),
                  fmt::format("1F1B runs one model chunk per pipeline rank, but virtual_stages is {}",
                              shape.virtual_stages),
                  "set parallel.virtual_stages: 1");
    try {
      return schedule::in_flight_1f1b_schedule(shape.pp, shape.microbatches,
                                               in_flight_counts(argument, shape, option));
    } catch (const Error& e) {
      // The schedule's own check names the rank; the option names where
      // the counts came from.
      throw Error(SourceLocation{{}, 0, 0, option}, e.problem(), e.fix());
    }
  }
  if (shape.virtual_stages != 2)
    throw Error(scenario.locations.locate("parallel.virtual_stages"),
                title + " runs two model chunks per pipeline rank, but virtual_stages is " +
                    std::to_string(shape.virtual_stages),
                "set parallel.virtual_stages: 2");
  if (name == "dualpipev") {
    if (shape.microbatches < 2 * shape.pp)
      throw Error(scenario.locations.locate("training.global_batch"),
                  fmt::format("DualPipeV needs at least 2·pp = {} microbatches per iteration, but global_batch / "
                              "(micro_batch × dp) gives {}",
                              2 * shape.pp, shape.microbatches),
                  fmt::format("raise training.global_batch until global_batch / (micro_batch × dp) >= {}",
                              2 * shape.pp));
    return schedule::dualpipev_schedule(shape.pp, shape.microbatches);
  }
  if (name == "dualpipe") {
    if (shape.pp < 2 || shape.pp % 2 != 0)
      throw Error(scenario.locations.locate("parallel.pp"),
                  fmt::format("DualPipe runs its two pipelines over an even number of pipeline ranks, but pp is {}",
                              shape.pp),
                  "set an even parallel.pp, or generate dualpipev");
    if (shape.microbatches < 2 * shape.pp || shape.microbatches % 2 != 0)
      throw Error(scenario.locations.locate("training.global_batch"),
                  fmt::format("DualPipe needs an even number of at least 2·pp = {} microbatches per iteration, but "
                              "global_batch / (micro_batch × dp) gives {}",
                              2 * shape.pp, shape.microbatches),
                  fmt::format("set training.global_batch so that global_batch / (micro_batch × dp) is even and >= {}",
                              2 * shape.pp));
    return schedule::dualpipe_schedule(shape.pp, shape.microbatches);
  }
  // runtime.py's activation estimate per layer (sail-sg/zero-bubble-pipeline-
  // parallelism, commit 39f2c186): F 34·h + 5·a·s, W −32·h, B −(F + W).
  const auto& llm = scenario.spec.model().llm();
  schedule::ZbvCosts costs;
  costs.forward_memory = 34 * llm.hidden_size() + 5 * llm.num_attention_heads() * llm.seq_length();
  costs.weight_memory = -32 * llm.hidden_size();
  costs.backward_memory = -(costs.forward_memory + costs.weight_memory);
  if (cost != nullptr) {
    // The greedy weighs passes by lacuna's own times, as the authors' runtime
    // feeds it profiled ones; 1 ns floors keep a pass the model times at zero
    // from vanishing from the order.
    const PassTimes t = mean_pass_times(compile(scenario), *cost);
    costs.forward = std::max<int64_t>(1, t.forward.count());
    costs.backward_input = std::max<int64_t>(1, t.backward_input.count());
    costs.backward_weight = std::max<int64_t>(1, t.backward_weight.count());
    costs.comm = std::max<int64_t>(1, t.p2p.count());
    if (times != nullptr) *times = t;
  }
  return schedule::zbv_schedule(shape.pp, shape.microbatches, costs);
}

}  // namespace lacuna::compiler
