#include "sim/placement/schedule_actions.h"

#include <algorithm>
#include <functional>

#include "sim/compiler/class_actions.h"
#include "sim/compiler/custom_schedule.h"
#include "sim/compiler/rank_layout.h"
#include "sim/core/error.h"
#include "sim/core/option_text.h"
#include "sim/placement/compile.h"
#include "sim/placement/hetero_plan.h"
#include "sim/placement/megatron_encoder_pp.h"
#include "sim/model/fp8.h"
#include "sim/placement/modules.h"
#include "sim/schedule/lower_amax.h"
#include "sim/schedule/lower_dp.h"
#include "sim/schedule/lower_p2p.h"
#include "sim/schedule/lower_recompute.h"

namespace lacuna::placement {
namespace {

// The encoder stage of global rank r, per encoder module (index = Op.module;
// 0, the LLM, unused): Optimus puts encoder stage s mod pp_enc on LLM stage s
// (optimus_plan.h, Geometry); the heterogeneous layouts give each encoder its
// rank layout from its first rank (colocated: rank 0).
using EncoderStageOf = std::function<int32_t(int32_t rank, int32_t module)>;

EncoderStageOf encoder_stages(const scenario::LoadedScenario& scenario, const ir::Program& program) {
  const auto kind = scenario.spec.placement().kind();
  if (kind == scenario::OPTIMUS)
    return [&program](int32_t rank, int32_t module) {
      const int32_t pp_enc = std::max(1, program.info().modules(module).pp());
      return program.ranks(rank).coord().pp() % pp_enc;
    };
  const hetero::Plan plan =
      hetero::make_plan(kind == scenario::MEGATRON_ENCODER_PP ? encoder_pp_scenario(scenario) : scenario);
  return [plan](int32_t rank, int32_t module) {
    for (const hetero::EncoderPlan& enc : plan.encoders) {
      if (enc.module != module) continue;
      if (rank < enc.first_rank || rank >= enc.last_rank_excl()) return 0;
      return compiler::RankLayout(enc.dims, enc.rank_order).coordinates(rank - enc.first_rank).pp();
    }
    return 0;
  };
}

// The compiled program's classes read back (class_actions), one line each.
schedule::ActionSchedule read_back(const scenario::LoadedScenario& scenario, std::vector<std::string>* lanes) {
  const ir::Program program = compile(scenario);
  const ir::ProgramInfo& info = program.info();
  std::vector<std::string> names{""};
  for (int32_t m = 1; m < info.modules_size(); ++m) {
    // The name prefixes the module's actions: it must read back as one.
    try {
      (void)schedule::parse_action(info.modules(m).name() + ":0F0", "");
    } catch (const Error&) {
      throw Error(scenario.locations.locate("model.encoders[" + std::to_string(m - 1) + "].transformer.name"),
                  "the encoder's name \"" + info.modules(m).name() + "\" cannot prefix its actions",
                  "name it with letters, digits, '_', '-' and '.' only");
    }
    names.push_back(info.modules(m).name());
  }
  // The LLM's stages as its pipeline lays them out (looped, or a V-shaped
  // actions file's), over the pipeline the placement compiled.
  schedule::PipelineShape shape;
  compiler::scenario_actions(llm_only(scenario), &shape);
  shape.pp = std::max(1, static_cast<int32_t>(info.pp()));
  const EncoderStageOf encoder_stage = encoder_stages(scenario, program);
  std::vector<int32_t> first_rank(static_cast<size_t>(program.classes_size()), -1), count(first_rank.size(), 0);
  for (int32_t r = 0; r < program.ranks_size(); ++r) {
    const auto c = static_cast<size_t>(program.ranks(r).class_id());
    if (first_rank[c] < 0) first_rank[c] = r;
    ++count[c];
  }
  schedule::ActionSchedule out;
  for (int32_t c = 0; c < program.classes_size(); ++c) {
    const int32_t r = first_rank[static_cast<size_t>(c)];
    if (r < 0) continue;  // a class no rank runs
    const int32_t pp_rank = program.ranks(r).coord().pp();
    const compiler::StageOf stage_of = [&](int32_t module, int32_t chunk) {
      return module == 0 ? schedule::virtual_stage(shape, pp_rank, chunk) : encoder_stage(r, module);
    };
    out.push_back({});
    for (auto& a : compiler::class_actions(program.classes(c), stage_of, names)) out.back().push_back(std::move(a));
    if (lanes)
      lanes->push_back("class " + program.classes(c).name() + ": " + std::to_string(count[static_cast<size_t>(c)]) +
                       (count[static_cast<size_t>(c)] == 1 ? " rank" : " ranks") + " from rank " + std::to_string(r));
  }
  return out;
}

}  // namespace

schedule::ActionSchedule schedule_actions(const scenario::LoadedScenario& scenario, bool with_p2p,
                                          std::vector<std::string>* lanes, bool with_dp, bool with_amax) {
  const auto& spec = scenario.spec;
  auto lowered = [&](schedule::ActionSchedule actions, scenario::ScheduleKind rule,
                     const schedule::PipelineShape& shape) {
    if (with_p2p && !schedule::has_p2p_actions(actions)) actions = schedule::lower_p2p(actions, rule, shape);
    if (with_dp && !schedule::has_dp_actions(actions))
      actions = schedule::add_dp_actions(actions, shape, compiler::scenario_dp_settings(scenario));
    if (with_amax && !schedule::has_amax_actions(actions)) {
      if (!model::fp8_delayed_amax_reduction(model::fp8_plan(scenario.spec)))
        throw Error(scenario.locations.locate("training.fp8"),
                    "the scenario's FP8 recipe reduces no amax: there are no AMAX actions to write (only delayed "
                    "scaling reduces amaxes, with FP8 on)",
                    "leave out " + option_ref("with-amax") + ", or turn on FP8 with delayed scaling");
      actions = schedule::add_amax_actions(actions);
    }
    return actions;
  };
  if (spec.model().encoders_size() == 0) {
    schedule::PipelineShape shape;
    schedule::ActionSchedule actions = compiler::scenario_actions(scenario, &shape);
    // Full recompute: where each backward's re-forward runs ("R&B", inside
    // it, unless a file moved it ahead).
    if (spec.parallel().recompute() == scenario::RECOMPUTE_FULL) actions = schedule::add_recompute_actions(actions);
    return lowered(std::move(actions), spec.schedule().kind(), shape);
  }
  const auto kind = spec.placement().kind();
  if (kind == scenario::OPTIMUS || kind == scenario::HETEROGENEOUS || kind == scenario::MEGATRON_ENCODER_PP) {
    if (with_p2p || with_dp || with_amax)
      throw Error(scenario.locations.locate("placement.kind"),
                  scenario::PlacementKind_Name(kind) + " is read back from its compiled program, whose " +
                      (with_p2p  ? "transfers run on their own streams: there are no blocking pipeline calls"
                       : with_dp ? "data-parallel work is the placement's, per module: there is no pipeline's DP "
                                   "pass"
                                 : "amax reductions are the placement's, per module: there is no pipeline's amax "
                                   "pass") +
                      " to write out",
                  "leave out " + option_ref(with_p2p ? "with-p2p" : with_dp ? "with-dp" : "with-amax") +
                      "; its compute passes are written as the classes run them");
    return read_back(scenario, lanes);
  }
  // The compiled program records the pipeline the placement chose (the
  // balanced placement picks its own model chunks and interleaves).
  const ir::Program program = compile(scenario);
  const ir::ProgramInfo& info = program.info();
  schedule::PipelineShape shape;
  shape.pp = static_cast<int32_t>(info.pp());
  shape.virtual_stages = static_cast<int32_t>(info.virtual_stages());
  shape.microbatches = static_cast<int32_t>(info.num_microbatches());
  if (shape.virtual_stages > 1)
    shape.microbatch_group = static_cast<int32_t>(spec.parallel().microbatch_group_size_per_vp_stage());
  schedule::ActionSchedule actions = schedule::to_actions(schedule::build_schedule(info.schedule(), shape), shape);
  return lowered(std::move(actions), info.schedule(), shape);
}

}  // namespace lacuna::placement
