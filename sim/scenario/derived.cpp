#include <algorithm>

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
  const int64_t pp = std::max<int64_t>(p.pp(), 1), v = std::max<int64_t>(p.virtual_stages(), 1);
  const int64_t layers = spec.model().llm().num_layers();
  const int64_t stages = pp * v;
  if (!p.has_first_stage_layers() && !p.has_last_stage_layers())
    return std::vector<int64_t>(static_cast<size_t>(stages), layers / stages);
  // Megatron-LM's uneven pipeline (--decoder-first/last-pipeline-num-layers,
  // core transformer_block.py get_num_layers_to_build): the first / last
  // pipeline rank holds the given layers, the other ranks split the rest
  // evenly, and each rank's layers split evenly over its model chunks.
  const bool first = p.has_first_stage_layers(), last = p.has_last_stage_layers();
  const int64_t rest = layers - (first ? p.first_stage_layers() : 0) - (last ? p.last_stage_layers() : 0);
  const int64_t others = pp - (first ? 1 : 0) - (last ? 1 : 0);
  std::vector<int64_t> out(static_cast<size_t>(stages));
  for (int64_t k = 0; k < stages; ++k) {
    const int64_t rank = k % pp;
    int64_t on_rank = others > 0 ? rest / others : 0;
    if (rank == 0 && first) on_rank = p.first_stage_layers();
    if (rank == pp - 1 && last) on_rank = p.last_stage_layers();
    out[static_cast<size_t>(k)] = on_rank / v;
  }
  return out;
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
