#include "sim/compiler/compile.h"

#include "sim/compiler/custom_schedule.h"
#include "sim/compiler/rank_layout.h"
#include "sim/compiler/segment_inputs.h"
#include "sim/compiler/stage_plan.h"
#include "sim/schedule/schedule.h"

namespace lacuna::compiler {

ir::Program compile(const scenario::LoadedScenario& scenario) { return compile(scenario, CompileOptions{}); }

ir::Program compile(const scenario::LoadedScenario& scenario, const CompileOptions& options) {
  const auto& spec = scenario.spec;
  const auto& par = spec.parallel();
  const PipelinePlan plan = pipeline_plan(scenario);
  StageInputs base =
      llm_stage_inputs(scenario, plan, par.virtual_stages() > 0 ? static_cast<int32_t>(par.virtual_stages()) : 1);
  base.pipeline.warmup_deferral = options.interleaved_warmup_deferral;
  const auto kind = spec.schedule().kind();  // validated: never UNSPECIFIED
  CustomSchedule order;
  if (kind == scenario::CUSTOM) {
    order = load_custom_schedule(scenario, base.pipeline);
    // DualPipe's two pipelines each hold the whole model (stage_plan.h).
    if (base.pipeline.layout == schedule::StageLayout::kBidirectional) base.stages = plan_mirrored_stages(scenario);
  } else
    order.passes = schedule::build_schedule(kind, base.pipeline);
  const auto& actions = order.passes;

  ir::Program program;
  *program.mutable_cluster() = spec.cluster();
  const RankLayout layout(plan.dims, par.rank_order());
  add_rank_layout(layout, static_cast<int32_t>(plan.gpus_per_node), program, par.distributed_optimizer());
  add_moe_layout(scenario, layout, program);
  add_fp8_layout(scenario, layout, program);
  if (base.pipeline.layout == schedule::StageLayout::kBidirectional) add_mirror_layout(layout, program);
  add_stage_classes(scenario, base, actions, program, &order);
  fill_program_info(scenario, plan, base, kind, *program.mutable_info());
  return program;
}

}  // namespace lacuna::compiler
