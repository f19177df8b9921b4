#include "sim/placement/optimus.h"

#include "sim/placement/optimus_planner.h"

namespace lacuna::placement {

ir::Program compile_optimus(const scenario::LoadedScenario& scenario, const cost::CostModel& cost) {
  const auto& opts = scenario.spec.placement().optimus();
  optimus::PlannerOptions options;
  options.coarse_only = opts.coarse_only();
  options.max_splits_per_plan = opts.max_splits_per_plan();  // 0: the default
  options.defer = !opts.no_deferral();
  return optimus::emit_optimus(scenario, optimus::plan_optimus(scenario, cost, options));
}

}  // namespace lacuna::placement
