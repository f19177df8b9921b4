#include "sim/placement/schedule_actions.h"

#include "sim/compiler/custom_schedule.h"
#include "sim/core/error.h"
#include "sim/placement/compile.h"
#include "sim/schedule/lower_p2p.h"

namespace lacuna::placement {

schedule::ActionSchedule schedule_actions(const scenario::LoadedScenario& scenario, bool with_p2p) {
  const auto& spec = scenario.spec;
  if (spec.model().encoders_size() == 0) {
    schedule::PipelineShape shape;
    schedule::ActionSchedule actions = compiler::scenario_actions(scenario, &shape);
    if (!with_p2p || schedule::has_p2p_actions(actions)) return actions;
    return schedule::lower_p2p(actions, spec.schedule().kind(), shape);
  }
  const auto kind = spec.placement().kind();
  if (kind != scenario::MEGATRON_BASELINE && kind != scenario::MEGATRON_BALANCED &&
      kind != scenario::MEGATRON_LAYER_SPLIT)
    throw Error(scenario.locations.locate("placement.kind"),
                scenario::PlacementKind_Name(kind) +
                    " schedules its encoders in its own representation, not yet as actions (issue 34)",
                "dump the schedule of MEGATRON_BASELINE, MEGATRON_BALANCED or MEGATRON_LAYER_SPLIT, or of the LLM "
                "alone");
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
  return with_p2p ? schedule::lower_p2p(actions, info.schedule(), shape) : actions;
}

}  // namespace lacuna::placement
