#include "sim/compiler/compile.h"

#include <algorithm>
#include <string>

#include "sim/compiler/rank_layout.h"
#include "sim/compiler/stage_plan.h"
#include "sim/compiler/stage_program.h"
#include "sim/cost/memory.h"
#include "sim/model/accounting.h"
#include "sim/model/layer_shape.h"
#include "sim/schedule/schedule.h"

#ifndef LACUNA_VERSION
#define LACUNA_VERSION "unknown"
#endif

namespace lacuna::compiler {
namespace {

// Beyond this a class no longer fits comfortably in memory (≈100 B per op)
// and the simulation takes minutes.
constexpr int64_t kMaxOpsPerClass = 5'000'000;

int32_t positive(int64_t v) { return v > 0 ? static_cast<int32_t>(v) : 1; }

cost::LayerActivationInputs activation_inputs(const model::LayerShape& s, scenario::Recompute recompute) {
  cost::LayerActivationInputs a;
  a.seq_length = s.seq_length;
  a.micro_batch = s.micro_batch;
  a.hidden = s.hidden;
  a.num_heads = s.heads;
  a.num_kv_heads = s.kv_heads;
  a.ffn_hidden = s.ffn_hidden;
  a.activation = s.activation;
  a.parallel_attention_mlp = s.parallel_attention_mlp;
  a.tp = s.tp;
  a.cp = s.cp;
  a.sequence_parallel = s.sequence_parallel;
  a.recompute = recompute;
  // The unfused core attention keeps its s² softmax / dropout tensors (SAR's
  // 5·a·s/h term, unless recomputed).
  a.flash_attention = !s.unfused_attention;
  return a;
}

}  // namespace

ir::Program compile(const scenario::LoadedScenario& scenario) {
  const auto& spec = scenario.spec;
  const auto& par = spec.parallel();
  const ParallelDims dims{positive(par.tp()), positive(par.cp()), positive(par.dp()), positive(par.pp())};
  const int64_t gpus_per_node = spec.cluster().has_gpus_per_node() ? spec.cluster().gpus_per_node() : 8;
  const int64_t gpus = spec.cluster().has_num_nodes() ? spec.cluster().num_nodes() * gpus_per_node : dims.world();
  if (dims.world() > gpus)
    throw Error(scenario.locations.locate("parallel"),
                "tp·cp·dp·pp = " + std::to_string(dims.world()) + " ranks, the cluster has " + std::to_string(gpus) +
                    " GPUs",
                "reduce the parallel sizes or add nodes");

  const int64_t micro_batch = spec.training().micro_batch();
  const int64_t global_batch = spec.training().global_batch();
  if (micro_batch <= 0 || global_batch % (micro_batch * dims.dp) != 0)
    throw Error(scenario.locations.locate("training.global_batch"),
                "global batch " + std::to_string(global_batch) + " is not a multiple of micro_batch × dp = " +
                    std::to_string(micro_batch * dims.dp),
                "choose a global batch divisible by micro_batch × dp");
  const int32_t microbatches = static_cast<int32_t>(global_batch / (micro_batch * dims.dp));

  StageInputs base;
  base.shape = model::layer_shape(spec);
  base.recompute = par.recompute();
  base.pipeline = {dims.pp, positive(par.virtual_stages()), microbatches};
  base.stages = plan_stages(scenario);
  base.dp_cp = static_cast<int64_t>(dims.dp) * dims.cp;
  base.distributed_optimizer = par.distributed_optimizer();
  base.overlap_grad_reduce = par.overlap_grad_reduce();
  base.overlap_param_gather = par.overlap_param_gather();
  base.ddp_bucket_size = std::max<int64_t>(par.ddp_bucket_size(), 0);  // 0: Megatron's default
  base.layer_activation_bytes = cost::layer_activation_bytes(activation_inputs(base.shape, base.recompute));
  if (base.recompute == scenario::RECOMPUTE_FULL)
    base.recompute_activation_bytes =
        cost::layer_activation_bytes(activation_inputs(base.shape, scenario::RECOMPUTE_NONE));

  const auto kind = spec.schedule().kind();  // validated: never UNSPECIFIED
  const auto actions = schedule::build_schedule(kind, base.pipeline);

  ir::Program program;
  *program.mutable_cluster() = spec.cluster();
  add_rank_layout(RankLayout(dims, par.rank_order()), static_cast<int32_t>(gpus_per_node), program);

  for (int32_t r = 0; r < dims.pp; ++r) {
    StageInputs in = base;
    in.pp_rank = r;
    in.actions = actions[static_cast<size_t>(r)];
    const int64_t estimate = estimate_ops(in);
    if (estimate > kMaxOpsPerClass)
      throw Error(scenario.locations.locate("training.global_batch"),
                  "pipeline stage " + std::to_string(r) + " would have about " + std::to_string(estimate) +
                      " ops (limit " + std::to_string(kMaxOpsPerClass) + ")",
                  "reduce the microbatches per pipeline (global_batch / (micro_batch × dp)) or the layers per "
                  "pipeline rank (more pp, fewer layers)");
    StageProgram stage = build_stage_program(in);
    const auto state = cost::model_state_bytes(stage.parameters, base.dp_cp, base.distributed_optimizer);
    auto* mem = stage.rank_class.mutable_memory();
    mem->set_weights_bytes(state.weights);
    mem->set_gradients_bytes(state.gradients);
    mem->set_optimizer_bytes(state.optimizer);
    *program.add_classes() = std::move(stage.rank_class);
  }

  auto* info = program.mutable_info();
  info->set_scenario_name(spec.name());
  info->set_scenario_file(scenario.path);
  info->set_lacuna_version(LACUNA_VERSION);
  info->set_num_ranks(dims.world());
  info->set_tokens_per_iteration(global_batch * spec.model().llm().seq_length());
  info->set_model_flops_per_iteration(
      model::model_flops_per_iteration(base.shape, spec.model().llm().num_layers(), global_batch));
  info->set_hardware_flops_per_iteration(model::hardware_flops_per_iteration(
      base.shape, spec.model().llm().num_layers(), global_batch, par.recompute()));
  const auto precision = spec.training().precision();  // validated: never UNSPECIFIED
  info->set_precision(precision);
  info->set_peak_flops_per_gpu(scenario::peak_flops_per_s(spec.cluster().gpu(), precision));
  info->set_tp(dims.tp);
  info->set_cp(dims.cp);
  info->set_pp(dims.pp);
  info->set_dp(dims.dp);
  info->set_virtual_stages(base.pipeline.virtual_stages);
  info->set_num_microbatches(microbatches);
  info->set_schedule(kind);
  info->set_global_batch(global_batch);
  info->set_micro_batch(micro_batch);
  info->set_seq_length(spec.model().llm().seq_length());
  info->set_recompute(base.recompute);
  info->set_sequence_parallel(base.shape.sequence_parallel);
  info->set_distributed_optimizer(base.distributed_optimizer);
  return program;
}

}  // namespace lacuna::compiler
