#include "sim/scenario/scenario.h"

namespace lacuna::scenario {

int64_t num_gpus(const Scenario& spec) { return spec.cluster().num_nodes() * spec.cluster().gpus_per_node(); }

int64_t num_microbatches(const Scenario& spec) {
  return spec.training().global_batch() / (spec.training().micro_batch() * spec.parallel().dp());
}

std::string effective_rank_order(const ParallelPlan& plan) {
  return plan.rank_order().empty() ? std::string("tp-cp-dp-pp") : plan.rank_order();
}

std::vector<int64_t> layers_per_virtual_stage(const Scenario& spec) {
  const auto& p = spec.parallel();
  if (!p.layers_per_stage().empty()) return {p.layers_per_stage().begin(), p.layers_per_stage().end()};
  const int64_t stages = p.pp() * p.virtual_stages();
  return std::vector<int64_t>(static_cast<size_t>(stages), spec.model().llm().num_layers() / stages);
}

OpEfficiency op_efficiency(const GpuSpec& gpu, const std::string& op_class) {
  const auto& table = gpu.efficiency();
  const Efficiency fallback = table.count("DEFAULT") ? table.at("DEFAULT") : Efficiency{};
  const auto it = table.find(op_class);
  const Efficiency* own = it == table.end() ? nullptr : &it->second;
  OpEfficiency out;
  out.flops = own && own->has_flops() ? own->flops() : fallback.flops();
  out.memory = own && own->has_memory() ? own->memory() : fallback.memory();
  return out;
}

}  // namespace lacuna::scenario
