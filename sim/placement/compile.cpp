#include "sim/placement/compile.h"

#include "sim/compiler/compile.h"
#include "sim/compiler/host_model.h"
#include "sim/compiler/memory_overheads.h"
#include "sim/compiler/megatron_mllm.h"
#include "sim/cost/cost_model.h"
#include "sim/placement/heterogeneous.h"
#include "sim/placement/modules.h"
#include "sim/placement/optimus.h"

namespace lacuna::placement {
namespace {

std::string placement_name(scenario::PlacementKind kind) {
  return scenario::PlacementKind_Name(kind);
}

// The placement's program before the host model (compiler/host_model.h),
// which every path then gets exactly once, as the memory overheads
// (compiler/memory_overheads.h).
ir::Program compile_placement(const scenario::LoadedScenario& scenario, scenario::PlacementKind kind,
                              const cost::CostModel& cost_model);

}  // namespace

ir::Program compile_as(const scenario::LoadedScenario& scenario, scenario::PlacementKind kind) {
  const auto& spec = scenario.spec;
  if (spec.model().encoders_size() == 0) {
    ir::Program p = compiler::compile(scenario);
    compiler::apply_host_model(p);
    compiler::apply_memory_overheads(p);
    return p;
  }
  // Optimus and the balanced partition time kernels while planning; they use
  // the model the simulation will use.
  const auto cost = cost::make_analytic_cost_model(spec.cluster(), spec.training().precision());
  return compile_as(scenario, kind, *cost);
}

ir::Program compile_as(const scenario::LoadedScenario& scenario, scenario::PlacementKind kind,
                       const cost::CostModel& cost_model) {
  ir::Program p = compile_placement(scenario, kind, cost_model);
  compiler::apply_host_model(p);
  compiler::apply_memory_overheads(p);
  return p;
}

namespace {

ir::Program compile_placement(const scenario::LoadedScenario& scenario, scenario::PlacementKind kind,
                              const cost::CostModel& cost_model) {
  const auto& spec = scenario.spec;
  if (spec.model().encoders_size() == 0) return compiler::compile(scenario);
  const cost::CostModel* cost = &cost_model;
  switch (kind) {
    case scenario::MEGATRON_BASELINE:
    case scenario::MEGATRON_BALANCED: {
      ir::Program p = compiler::compile_megatron_mllm(scenario, kind, *cost);
      // Megatron runs every encoder in the LLM's layout.
      const auto& par = spec.parallel();
      scenario::ModuleLayout inherited;
      inherited.set_tp(par.tp());
      inherited.set_cp(par.cp());
      inherited.set_pp(kind == scenario::MEGATRON_BASELINE ? 1 : par.pp());
      inherited.set_dp(par.dp());
      inherited.set_virtual_stages(p.info().virtual_stages());
      inherited.set_sequence_parallel(par.sequence_parallel());
      inherited.set_recompute(par.recompute());
      const std::vector<scenario::ModuleLayout> layouts(static_cast<size_t>(spec.model().encoders_size()), inherited);
      add_multimodal_info(spec, kind, layouts, *p.mutable_info());
      return p;
    }
    case scenario::OPTIMUS:
      return compile_optimus(scenario, *cost);
    case scenario::HETEROGENEOUS:
      for (int e = 0; e < spec.model().encoders_size(); ++e)
        if (!spec.model().encoders(e).has_layout())
          throw Error(scenario.locations.locate("model.encoders[" + std::to_string(e) + "]"),
                      "the heterogeneous placement needs a layout for every encoder; encoder " +
                          std::to_string(e) + " has none",
                      "add `layout { tp: .. cp: .. pp: .. dp: .. first_rank: .. }` to the encoder");
      return compile_heterogeneous(scenario, *cost);
    default:
      throw Error(scenario.locations.locate("placement.kind"),
                  "placement " + placement_name(kind) + " cannot be compiled",
                  "choose MEGATRON_BASELINE, MEGATRON_BALANCED, OPTIMUS or HETEROGENEOUS");
  }
}

}  // namespace

ir::Program compile(const scenario::LoadedScenario& scenario) {
  return compile_as(scenario, scenario.spec.placement().kind());
}

ir::Program compile(const scenario::LoadedScenario& scenario, const cost::CostModel& cost) {
  return compile_as(scenario, scenario.spec.placement().kind(), cost);
}

std::vector<scenario::PlacementKind> applicable_placements(const scenario::LoadedScenario& scenario) {
  const auto& spec = scenario.spec;
  if (spec.model().encoders_size() == 0) return {};
  std::vector<scenario::PlacementKind> out{scenario::MEGATRON_BASELINE, scenario::MEGATRON_BALANCED,
                                           scenario::OPTIMUS};
  bool all_layouts = true;
  for (const auto& e : spec.model().encoders()) all_layouts = all_layouts && e.has_layout();
  if (all_layouts) out.push_back(scenario::HETEROGENEOUS);
  return out;
}

}  // namespace lacuna::placement
