#include "sim/placement/modules.h"

#include <set>

#include "sim/model/accounting.h"
#include "sim/model/layer_shape.h"

namespace lacuna::placement {
namespace {

int32_t at_least_one(int64_t v) { return v > 0 ? static_cast<int32_t>(v) : 1; }

}  // namespace

scenario::LoadedScenario llm_only(const scenario::LoadedScenario& scenario) {
  scenario::LoadedScenario out = scenario;
  out.spec.mutable_model()->clear_encoders();
  out.spec.clear_placement();
  return out;
}

compiler::ModuleRecompute llm_recompute(const scenario::Scenario& spec) {
  const auto& par = spec.parallel();
  return {par.recompute(), par.recompute() == scenario::RECOMPUTE_FULL ? par.recompute_num_layers() : 0};
}

scenario::LoadedScenario with_llm_recompute(const scenario::LoadedScenario& scenario,
                                            const compiler::ModuleRecompute& r) {
  scenario::LoadedScenario out = scenario;
  auto* par = out.spec.mutable_parallel();
  par->set_recompute(r.mode);
  par->set_recompute_num_layers(r.mode == scenario::RECOMPUTE_FULL ? r.num_layers : 0);
  return out;
}

ir::ModuleInfo llm_module_info(const scenario::Scenario& spec) {
  const auto& par = spec.parallel();
  ir::ModuleInfo m;
  m.set_name(spec.model().llm().name().empty() ? "llm" : spec.model().llm().name());
  m.set_is_encoder(false);
  m.set_tp(at_least_one(par.tp()));
  m.set_cp(at_least_one(par.cp()));
  m.set_pp(at_least_one(par.pp()));
  m.set_dp(at_least_one(par.dp()));
  m.set_virtual_stages(at_least_one(par.virtual_stages()));
  m.set_first_rank(0);
  m.set_num_ranks(m.tp() * m.cp() * m.pp() * m.dp());
  const auto shape = model::layer_shape(spec);
  m.set_parameters(model::model_parameters(shape, spec.model().llm().num_layers()));
  m.set_model_flops_per_iteration(
      model::model_flops_per_iteration(shape, spec.model().llm().num_layers(), spec.training().global_batch()));
  m.set_recompute(par.recompute());
  if (par.recompute() == scenario::RECOMPUTE_FULL) m.set_recompute_num_layers(par.recompute_num_layers());
  if (shape.moe.enabled()) {  // docs/moe.md
    m.set_ep(static_cast<int32_t>(shape.moe.ep));
    m.set_expert_tp(static_cast<int32_t>(shape.moe.expert_tp));
  }
  return m;
}

ir::ModuleInfo encoder_module_info(const scenario::Scenario& spec, int e, const scenario::ModuleLayout& layout) {
  const auto& enc = spec.model().encoders(e);
  ir::ModuleInfo m;
  m.set_name(enc.transformer().name().empty() ? "encoder" + std::to_string(e) : enc.transformer().name());
  m.set_is_encoder(true);
  m.set_tp(at_least_one(layout.tp()));
  m.set_cp(at_least_one(layout.cp()));
  m.set_pp(at_least_one(layout.pp()));
  m.set_dp(at_least_one(layout.dp()));
  m.set_virtual_stages(at_least_one(layout.virtual_stages()));
  m.set_first_rank(static_cast<int32_t>(layout.first_rank()));
  m.set_num_ranks(m.tp() * m.cp() * m.pp() * m.dp());
  m.set_parameters(model::encoder_parameters(spec, e));
  m.set_model_flops_per_iteration(model::encoder_model_flops_per_iteration(spec, e, spec.training().global_batch()));
  m.set_frozen(enc.frozen());
  // A frozen encoder runs no backward: nothing to recompute.
  m.set_recompute(enc.frozen() ? scenario::RECOMPUTE_NONE : layout.recompute());
  if (m.recompute() == scenario::RECOMPUTE_FULL) m.set_recompute_num_layers(layout.recompute_num_layers());
  return m;
}

int64_t recomputed_layers(const ir::Program& program, int32_t module) {
  std::set<int32_t> layers;
  for (const ir::RankClass& cls : program.classes())
    for (const ir::Stream& st : cls.streams())
      for (const ir::Op& op : st.ops())
        if (op.module() == module && op.phase() == ir::RECOMPUTE && op.has_compute() && op.layer() >= 0)
          layers.insert(op.layer());
  return static_cast<int64_t>(layers.size());
}

void add_multimodal_info(const scenario::Scenario& spec, scenario::PlacementKind placement,
                         const std::vector<scenario::ModuleLayout>& encoder_layouts, ir::Program& program) {
  ir::ProgramInfo& info = *program.mutable_info();
  info.set_placement(placement);
  info.clear_modules();
  *info.add_modules() = llm_module_info(spec);
  double model_flops = info.model_flops_per_iteration();
  double hardware_flops = info.hardware_flops_per_iteration();
  for (int e = 0; e < spec.model().encoders_size(); ++e) {
    const auto& layout = encoder_layouts.at(static_cast<size_t>(e));
    *info.add_modules() = encoder_module_info(spec, e, layout);
    model_flops += model::encoder_model_flops_per_iteration(spec, e, spec.training().global_batch());
    const bool block = layout.recompute() == scenario::RECOMPUTE_FULL && layout.recompute_num_layers() > 0;
    hardware_flops += model::encoder_hardware_flops_per_iteration(
        spec, e, spec.training().global_batch(), layout.recompute(), block ? recomputed_layers(program, e + 1) : -1);
  }
  info.set_model_flops_per_iteration(model_flops);
  info.set_hardware_flops_per_iteration(hardware_flops);
}

}  // namespace lacuna::placement
