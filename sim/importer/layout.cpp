#include "sim/importer/layout.h"

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/scenario/scenario.h"

namespace lacuna::importer {

int64_t padded_vocab(int64_t vocab, int64_t divisible_by, int64_t tp) {
  const int64_t multiple = divisible_by * tp;
  return multiple <= 0 ? vocab : (vocab + multiple - 1) / multiple * multiple;
}

namespace {

int64_t take(const Sourced<int64_t>& s, int64_t fallback, const std::string& path, const std::string& why,
             Annotated& a) {
  if (s.value) {
    a.from(path, s.source);
    return *s.value;
  }
  a.from(path, "default: " + why);
  return fallback;
}

}  // namespace

void apply_layout(const LayoutOptions& o, Annotated& a) {
  auto& spec = a.spec;
  auto& cl = *spec.mutable_cluster();
  cl.set_preset(o.cluster_preset);
  a.from("cluster.preset", o.cluster_preset == "h100-sxm" ? "default: import option --cluster-preset not given"
                                                          : "--cluster-preset");
  const scenario::Cluster& preset = scenario::hardware_preset(o.cluster_preset);
  int64_t per_node = preset.gpus_per_node();
  if (o.gpus_per_node.value) {
    per_node = *o.gpus_per_node.value;
    cl.set_gpus_per_node(per_node);
    a.from("cluster.gpus_per_node", o.gpus_per_node.source);
  }
  int64_t nodes = 1;
  if (o.num_nodes.value) {
    nodes = *o.num_nodes.value;
    a.from("cluster.num_nodes", o.num_nodes.source);
  } else if (o.world_size) {
    if (per_node <= 0 || *o.world_size % per_node != 0)
      throw Error(SourceLocation{"WORLD_SIZE", 0, 0, {}},
                  fmt::format("{} GPUs do not fill whole nodes of {} GPUs", *o.world_size, per_node),
                  "pass --num-nodes and --gpus-per-node to the import command");
    nodes = *o.world_size / per_node;
    a.from("cluster.num_nodes", fmt::format("WORLD_SIZE={} / {} GPUs per node", *o.world_size, per_node));
  } else {
    a.from("cluster.num_nodes", "default: one node (import option --num-nodes not given, no WORLD_SIZE)");
  }
  cl.set_num_nodes(nodes);
  const int64_t gpus = nodes * per_node;

  auto& p = *spec.mutable_parallel();
  const int64_t tp = take(o.tp, 1, "parallel.tp", "1", a);
  const int64_t cp = take(o.cp, 1, "parallel.cp", "1", a);
  const int64_t pp = take(o.pp, 1, "parallel.pp", "1", a);
  p.set_tp(tp);
  p.set_cp(cp);
  p.set_pp(pp);
  if (o.sequence_parallel.value && *o.sequence_parallel.value) {
    p.set_sequence_parallel(true);
    a.from("parallel.sequence_parallel", o.sequence_parallel.source);
  }
  if (o.distributed_optimizer.value && *o.distributed_optimizer.value) {
    p.set_distributed_optimizer(true);
    a.from("parallel.distributed_optimizer", o.distributed_optimizer.source);
  }
  const int64_t model = tp * cp * pp;
  int64_t dp = 0;
  if (o.dp.value) {
    dp = *o.dp.value;
    a.from("parallel.dp", o.dp.source);
  } else {
    if (model <= 0 || gpus % model != 0)
      throw Error(SourceLocation{{}, 0, 0, "parallel.dp"},
                  fmt::format("{} GPUs ({} nodes × {}) do not divide into tp·cp·pp = {}·{}·{} = {}", gpus, nodes,
                              per_node, tp, cp, pp, model),
                  "choose --num-nodes (or WORLD_SIZE) as a multiple of tp·cp·pp / GPUs per node");
    dp = gpus / model;
    a.from("parallel.dp", fmt::format("default: {} GPUs / (tp·cp·pp = {})", gpus, model));
  }
  p.set_dp(dp);
  const int64_t v = take(o.virtual_stages, 1, "parallel.virtual_stages", "1 (no interleaving)", a);
  p.set_virtual_stages(v);
  if (spec.model().llm().moe().num_experts() > 0) {
    p.set_ep(take(o.ep, 1, "parallel.ep", "1", a));
    p.set_expert_tp(take(o.expert_tp, tp, "parallel.expert_tp", "tp (Megatron-Core's expert_tensor_parallel_size)", a));
  }
  p.set_rank_order("tp-cp-dp-pp");
  a.from("parallel.rank_order", "default: Megatron-LM's order (TP innermost, PP outermost)");

  spec.mutable_schedule()->set_kind(v > 1 ? scenario::INTERLEAVED_1F1B : scenario::ONE_F_ONE_B);
  a.from("schedule.kind", v > 1 ? "virtual_stages > 1: Megatron-LM's interleaved schedule"
                                : "Megatron-LM's schedule without virtual stages");
  spec.mutable_execution()->set_software("megatron-core-0.12");
  a.from("execution.software", "default: the newest software lacuna models");

  auto& t = *spec.mutable_training();
  const int64_t micro = take(o.micro_batch, 1, "training.micro_batch", "1", a);
  t.set_micro_batch(micro);
  // A multiple of pp microbatches, as interleaving needs; 4·pp keeps the
  // 1F1B bubble (pp−1)/(m+pp−1) under a fifth.
  const int64_t microbatches = pp > 1 ? 4 * pp : 1;
  t.set_global_batch(take(o.global_batch, dp * micro * microbatches, "training.global_batch",
                          fmt::format("dp × micro_batch × {} microbatches{}", microbatches,
                                      pp > 1 ? " (4·pp)" : ""),
                          a));
}

}  // namespace lacuna::importer
