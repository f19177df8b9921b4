#include "sim/placement/compile.h"

#include <memory>

#include "sim/compiler/compile.h"
#include "sim/compiler/host_model.h"
#include "sim/compiler/memory_overheads.h"
#include "sim/placement/megatron_mllm.h"
#include "sim/cost/cost_model.h"
#include "sim/placement/heterogeneous.h"
#include "sim/placement/megatron_encoder_pp.h"
#include "sim/placement/modules.h"
#include "sim/placement/optimus.h"
#include "sim/placement/recompute_fit.h"

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
  if (scenario.spec.model().encoders_size() > 0) {
    p.mutable_info()->set_planning_cost_model(std::string(cost_model.name()));
  }
  compiler::apply_host_model(p);
  compiler::apply_memory_overheads(p);
  return p;
}

namespace {

// Megatron's placements ask every encoder to recompute like the LLM, every
// layer (Megatron gives a vision model its own TransformerConfig, so the
// planner may raise each one on its own).
RecomputeRequest megatron_request(const scenario::Scenario& spec, scenario::PlacementKind kind) {
  RecomputeRequest r;
  // The balanced partition follows the layers' times, recompute included.
  // The layer split cuts by layer count, whatever the times.
  r.fixed_order = kind != scenario::MEGATRON_BALANCED;
  r.requested.push_back(llm_recompute(spec));
  r.adjustable.push_back(true);
  for (const auto& e : spec.model().encoders()) {
    r.requested.push_back({spec.parallel().recompute(), 0});
    r.adjustable.push_back(!e.frozen());
  }
  return r;
}

CompileWithRecompute megatron_with(const scenario::LoadedScenario& scenario, scenario::PlacementKind kind,
                                   const cost::CostModel& cost) {
  return [&scenario, kind, &cost](const std::vector<ModuleRecompute>& r) {
    const scenario::LoadedScenario s = with_llm_recompute(scenario, r.at(0));
    const std::vector<ModuleRecompute> encoders(r.begin() + 1, r.end());
    ir::Program p = compile_megatron_mllm(s, kind, cost, encoders);
    // Megatron runs every encoder in the LLM's layout.
    const auto& par = s.spec.parallel();
    std::vector<scenario::ModuleLayout> layouts;
    for (const ModuleRecompute& e : encoders) {
      scenario::ModuleLayout l;
      l.set_tp(par.tp());
      l.set_cp(par.cp());
      l.set_pp(kind == scenario::MEGATRON_BASELINE ? 1 : par.pp());  // chained: spread over the LLM's stages
      l.set_dp(par.dp());
      l.set_virtual_stages(p.info().virtual_stages());
      l.set_sequence_parallel(par.sequence_parallel());
      l.set_recompute(e.mode);
      l.set_recompute_num_layers(e.num_layers);
      layouts.push_back(l);
    }
    add_multimodal_info(s.spec, kind, layouts, p);
    compiler::apply_memory_overheads(p);
    return p;
  };
}

// The heterogeneous placement: each encoder's layout says how it recomputes.
RecomputeRequest heterogeneous_request(const scenario::Scenario& spec) {
  RecomputeRequest r;
  r.fixed_order = true;  // static schedules (three phases, graph-aware 1F1B)
  r.requested.push_back(llm_recompute(spec));
  r.adjustable.push_back(true);
  for (const auto& e : spec.model().encoders()) {
    const auto& l = e.layout();
    r.requested.push_back({l.recompute(), l.recompute() == scenario::RECOMPUTE_FULL ? l.recompute_num_layers() : 0});
    r.adjustable.push_back(!e.frozen());
  }
  return r;
}

CompileWithRecompute heterogeneous_with(const scenario::LoadedScenario& scenario, const cost::CostModel& cost) {
  return [&scenario, &cost](const std::vector<ModuleRecompute>& r) {
    scenario::LoadedScenario s = with_llm_recompute(scenario, r.at(0));
    for (int e = 0; e < s.spec.model().encoders_size(); ++e) {
      auto* l = s.spec.mutable_model()->mutable_encoders(e)->mutable_layout();
      l->set_recompute(r.at(static_cast<size_t>(e) + 1).mode);
      l->set_recompute_num_layers(r.at(static_cast<size_t>(e) + 1).num_layers);
    }
    ir::Program p = compile_heterogeneous(s, cost);
    compiler::apply_memory_overheads(p);
    return p;
  };
}

// Megatron's encoder pipeline: the heterogeneous compiler on the island
// scenario it amounts to (megatron_encoder_pp.h), recorded as its own kind.
CompileWithRecompute encoder_pp_with(const scenario::LoadedScenario& scenario, const cost::CostModel& cost) {
  auto island = std::make_shared<const scenario::LoadedScenario>(encoder_pp_scenario(scenario));
  CompileWithRecompute inner = heterogeneous_with(*island, cost);
  return [island, inner](const std::vector<ModuleRecompute>& r) {
    ir::Program p = inner(r);
    p.mutable_info()->set_placement(scenario::MEGATRON_ENCODER_PP);
    return p;
  };
}

}  // namespace

RecomputeRequest recompute_request(const scenario::LoadedScenario& scenario, scenario::PlacementKind kind) {
  switch (kind) {
    case scenario::MEGATRON_BASELINE:
    case scenario::MEGATRON_BALANCED:
    case scenario::MEGATRON_LAYER_SPLIT: return megatron_request(scenario.spec, kind);
    case scenario::HETEROGENEOUS: return heterogeneous_request(scenario.spec);
    case scenario::MEGATRON_ENCODER_PP: return heterogeneous_request(encoder_pp_scenario(scenario).spec);
    default:
      throw Error(scenario.locations.locate("placement.kind"),
                  placement_name(kind) + " plans its recompute itself (or has no recompute search)");
  }
}

CompileWithRecompute compile_with_recompute(const scenario::LoadedScenario& scenario, scenario::PlacementKind kind,
                                            const cost::CostModel& cost) {
  switch (kind) {
    case scenario::MEGATRON_BASELINE:
    case scenario::MEGATRON_BALANCED:
    case scenario::MEGATRON_LAYER_SPLIT: return megatron_with(scenario, kind, cost);
    case scenario::HETEROGENEOUS: return heterogeneous_with(scenario, cost);
    case scenario::MEGATRON_ENCODER_PP: return encoder_pp_with(scenario, cost);
    default:
      throw Error(scenario.locations.locate("placement.kind"),
                  placement_name(kind) + " plans its recompute itself (or has no recompute search)");
  }
}

namespace {

ir::Program compile_placement(const scenario::LoadedScenario& scenario, scenario::PlacementKind kind,
                              const cost::CostModel& cost_model) {
  const auto& spec = scenario.spec;
  if (spec.model().encoders_size() == 0) return compiler::compile(scenario);
  const cost::CostModel* cost = &cost_model;
  switch (kind) {
    case scenario::MEGATRON_BASELINE:
    case scenario::MEGATRON_BALANCED:
    case scenario::MEGATRON_LAYER_SPLIT:
    case scenario::MEGATRON_ENCODER_PP:
      return fit_recompute(recompute_request(scenario, kind), compile_with_recompute(scenario, kind, *cost), *cost)
          .program;
    case scenario::OPTIMUS:
      return compile_optimus(scenario, *cost);
    case scenario::HETEROGENEOUS:
      for (int e = 0; e < spec.model().encoders_size(); ++e)
        if (!spec.model().encoders(e).has_layout())
          throw Error(scenario.locations.locate("model.encoders[" + std::to_string(e) + "]"),
                      "the heterogeneous placement needs a layout for every encoder; encoder " +
                          std::to_string(e) + " has none",
                      "add `layout { tp: .. cp: .. pp: .. dp: .. first_rank: .. }` to the encoder");
      return fit_recompute(recompute_request(scenario, kind), compile_with_recompute(scenario, kind, *cost), *cost)
          .program;
    default:
      throw Error(scenario.locations.locate("placement.kind"),
                  "placement " + placement_name(kind) + " cannot be compiled",
                  "choose MEGATRON_BASELINE, MEGATRON_BALANCED, OPTIMUS, HETEROGENEOUS, MEGATRON_ENCODER_PP or "
                  "MEGATRON_LAYER_SPLIT");
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
  // Heterogeneous always applies: compare derives the encoders' layouts the
  // scenario does not give (placement::choose_heterogeneous). Megatron's
  // other two encoder placements are tried everywhere: where one cannot be
  // built (no room for the encoder's ranks, several encoders, a chain shorter
  // than the stages, …) compare lists it with the reason.
  return {scenario::MEGATRON_BASELINE, scenario::MEGATRON_BALANCED,    scenario::OPTIMUS,
          scenario::HETEROGENEOUS,     scenario::MEGATRON_ENCODER_PP, scenario::MEGATRON_LAYER_SPLIT};
}

}  // namespace lacuna::placement
