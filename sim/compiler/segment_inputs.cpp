#include "sim/compiler/segment_inputs.h"

#include <algorithm>
#include <string>

#include "sim/compiler/fp8_weights.h"
#include "sim/compiler/stage_plan.h"
#include "sim/core/error.h"
#include "sim/model/accounting.h"
#include "sim/model/fp8.h"
#include "sim/model/kernels.h"
#include "sim/model/layer.h"
#include "sim/model/layer_shape.h"
#include "sim/model/moe.h"
#include "sim/scenario/execution.h"
#include "sim/scenario/moe.h"
#include "sim/scenario/nvlink_domain.h"
#include "sim/core/version.h"

namespace lacuna::compiler {
namespace {

// Beyond this a class no longer fits comfortably in memory (≈100 B per op)
// and the simulation takes minutes.
constexpr int64_t kMaxOpsPerClass = 5'000'000;

int32_t positive(int64_t v) { return v > 0 ? static_cast<int32_t>(v) : 1; }

void append(std::vector<model::Step>& to, const std::vector<model::Step>& from) {
  to.insert(to.end(), from.begin(), from.end());
}

}  // namespace

PipelinePlan pipeline_plan(const scenario::LoadedScenario& scenario) {
  const auto& spec = scenario.spec;
  const auto& par = spec.parallel();
  PipelinePlan plan;
  plan.dims = ParallelDims{positive(par.tp()), positive(par.cp()), positive(par.dp()), positive(par.pp())};
  plan.gpus_per_node = spec.cluster().has_gpus_per_node() ? spec.cluster().gpus_per_node() : 8;
  const int64_t gpus =
      spec.cluster().has_num_nodes() ? spec.cluster().num_nodes() * plan.gpus_per_node : plan.dims.world();
  if (plan.dims.world() > gpus)
    throw Error(scenario.locations.locate("parallel"),
                "tp·cp·dp·pp = " + std::to_string(plan.dims.world()) + " ranks, the cluster has " +
                    std::to_string(gpus) + " GPUs",
                "reduce the parallel sizes or add nodes");
  plan.micro_batch = spec.training().micro_batch();
  plan.global_batch = spec.training().global_batch();
  if (plan.micro_batch <= 0 || plan.global_batch % (plan.micro_batch * plan.dims.dp) != 0)
    throw Error(scenario.locations.locate("training.global_batch"),
                "global batch " + std::to_string(plan.global_batch) + " is not a multiple of micro_batch × dp = " +
                    std::to_string(plan.micro_batch * plan.dims.dp),
                "choose a global batch divisible by micro_batch × dp");
  plan.microbatches = static_cast<int32_t>(plan.global_batch / (plan.micro_batch * plan.dims.dp));
  return plan;
}

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
  a.fp8_gemm_inputs = s.fp8.linear() && s.fp8.activation_storage && s.fp8.wgrad;
  return a;
}

StageInputs llm_stage_inputs(const scenario::LoadedScenario& scenario, const PipelinePlan& plan,
                             int32_t virtual_stages, bool plan_layers) {
  const auto& par = scenario.spec.parallel();
  StageInputs base;
  base.shape = model::layer_shape(scenario.spec);
  base.recompute = par.recompute();
  base.pipeline = {plan.dims.pp, virtual_stages, plan.microbatches};
  if (virtual_stages > 1)
    base.pipeline.microbatch_group =
        static_cast<int32_t>(scenario.spec.parallel().microbatch_group_size_per_vp_stage());
  if (plan_layers) base.stages = plan_stages(scenario);
  base.dp_cp = static_cast<int64_t>(plan.dims.dp) * plan.dims.cp;
  base.distributed_optimizer = par.distributed_optimizer();
  base.overlap_grad_reduce = par.overlap_grad_reduce();
  base.overlap_param_gather = par.overlap_param_gather();
  base.ddp_bucket_size = std::max<int64_t>(par.ddp_bucket_size(), 0);  // 0: Megatron's default
  base.layer_activation_bytes = cost::layer_activation_bytes(activation_inputs(base.shape, base.recompute));
  if (base.recompute == scenario::RECOMPUTE_FULL) {
    base.recompute_activation_bytes =
        cost::layer_activation_bytes(activation_inputs(base.shape, scenario::RECOMPUTE_NONE));
    base.recompute_num_layers = std::max<int64_t>(par.recompute_num_layers(), 0);
  }
  base.execution = scenario::resolve_execution(scenario.spec, scenario.locations);
  base.schedule_kind = scenario.spec.schedule().kind();
  base.precision = scenario.spec.training().precision();
  if (scenario::has_moe(scenario.spec)) base.expert_dp = scenario::expert_dp(scenario.spec);
  return base;
}

ModuleWork encoder_work(const scenario::Scenario& spec, int e, int64_t samples, const model::ShardSpec& shard,
                        scenario::Recompute recompute, int64_t recompute_num_layers) {
  const bool frozen = spec.model().encoders(e).frozen();
  ModuleWork w;
  w.shape = model::encoder_layer_shape(spec, e, samples, shard);
  w.num_layers = spec.model().encoders(e).transformer().num_layers();
  w.frozen = frozen;
  const auto projector = model::projector_shape(spec, e, samples, shard);
  w.layer_forward = model::layer_forward(w.shape);
  w.pre_forward = model::patch_embedding_forward(w.shape);
  w.post_forward = model::encoder_final_norm_forward(w.shape);
  append(w.post_forward, model::projector_forward(projector));
  // Autograd order: projector, then (trained encoders only) the final norm,
  // the layers and the patch embedding's weight gradient. The projector of a
  // frozen encoder skips its input gradient (projector_shape knows).
  w.post_backward = model::projector_backward(projector);
  if (!frozen) {
    w.layer_backward = model::layer_backward(w.shape, recompute);
    w.pre_backward = model::patch_embedding_backward(w.shape);
    append(w.post_backward, model::encoder_final_norm_backward(w.shape));
  }
  w.layer_parameters = model::encoder_layer_parameters(spec, e, shard);
  w.pre_parameters = model::patch_embedding_parameters(spec, e);
  const int64_t final_norm = model::encoder_final_norm_parameters(spec, e);
  w.post_parameters = model::projector_parameters(projector) + final_norm;
  w.post_frozen_parameters = frozen ? final_norm : 0;
  // A frozen encoder keeps nothing for a backward it never runs; the
  // projector keeps its inputs for its weight gradients either way, a trained
  // encoder also the final norm's input (its SP share).
  w.post_activation_bytes = model::projector_activation_bytes(projector);
  if (!frozen) {
    w.layer_activation_bytes = cost::layer_activation_bytes(activation_inputs(w.shape, recompute));
    if (recompute == scenario::RECOMPUTE_FULL)
      w.recompute_activation_bytes = cost::layer_activation_bytes(activation_inputs(w.shape, scenario::RECOMPUTE_NONE));
    if (recompute == scenario::RECOMPUTE_FULL && recompute_num_layers > 0) {
      w.recompute_num_layers = recompute_num_layers;
      w.layer_backward_plain = model::layer_backward(w.shape, scenario::RECOMPUTE_NONE);
      w.layer_activation_bytes_plain = w.recompute_activation_bytes;
    }
    w.post_activation_bytes += Bytes(w.shape.sp_tokens() * w.shape.hidden * model::kBf16);
  }
  // Between pipeline stages hidden states travel sequence-sharded under SP.
  w.layer_p2p_bytes = w.shape.hidden_bytes() / (w.shape.sequence_parallel ? w.shape.tp : 1);
  w.output_p2p_bytes =
      projector.tokens * projector.hidden * model::kBf16 / (projector.sequence_parallel ? projector.tp : 1);
  return w;
}

void add_stage_classes(const scenario::LoadedScenario& scenario, const StageInputs& base,
                       const std::vector<std::vector<schedule::Action>>& actions, ir::Program& program,
                       const CustomSchedule* custom) {
  for (int32_t r = 0; r < base.pipeline.pp; ++r) {
    StageInputs in = base;
    in.pp_rank = r;
    in.actions = actions[static_cast<size_t>(r)];
    if (custom != nullptr && custom->p2p_calls) in.p2p_calls = (*custom->p2p_calls)[static_cast<size_t>(r)];
    if (custom != nullptr && !custom->overlapped_pairs.empty())
      in.overlapped_pairs = custom->overlapped_pairs[static_cast<size_t>(r)];
    if (custom != nullptr && custom->dp_points) in.dp_points = (*custom->dp_points)[static_cast<size_t>(r)];
    if (custom != nullptr && custom->amax_passes) in.amax_passes = (*custom->amax_passes)[static_cast<size_t>(r)];
    const int64_t estimate = estimate_ops(in);
    if (estimate > kMaxOpsPerClass)
      throw Error(scenario.locations.locate("training.global_batch"),
                  "pipeline stage " + std::to_string(r) + " would have about " + std::to_string(estimate) +
                      " ops (limit " + std::to_string(kMaxOpsPerClass) + ")",
                  "reduce the microbatches per pipeline (global_batch / (micro_batch × dp)) or the layers per "
                  "pipeline rank (more pp, fewer layers)");
    StageProgram stage = build_stage_program(in);
    const int64_t grad_bytes = base.execution.grad_reduce_in_fp32() ? 4 : 2;
    // MoE: routed-expert state sharded over expert DP (docs/moe.md#memory).
    auto state = cost::model_state_bytes(stage.parameters - stage.frozen_parameters - stage.expert_parameters,
                                         base.dp_cp, base.distributed_optimizer, grad_bytes);
    if (stage.expert_parameters > 0) {
      const auto experts = cost::model_state_bytes(stage.expert_parameters, std::max<int64_t>(base.expert_dp, 1),
                                                   base.distributed_optimizer, grad_bytes);
      state.weights += experts.weights;
      state.gradients += experts.gradients;
      state.optimizer += experts.optimizer;
    }
    // Frozen weights: bf16 copies only (no gradient buffer, no optimizer).
    state.weights += cost::model_state_bytes(stage.frozen_parameters, base.dp_cp, base.distributed_optimizer).weights;
    state.weights += fp8_weight_memory_delta(in);  // FP8 weight copies (docs/fp8.md#weights)
    auto* mem = stage.rank_class.mutable_memory();
    mem->set_weights_bytes(state.weights.count());
    mem->set_gradients_bytes(state.gradients.count());
    mem->set_optimizer_bytes(state.optimizer.count());
    *program.add_classes() = std::move(stage.rank_class);
  }
}

void add_moe_layout(const scenario::LoadedScenario& scenario, const RankLayout& layout, ir::Program& program) {
  const auto& spec = scenario.spec;
  if (!scenario::has_moe(spec)) return;
  ExpertDims e;
  e.ep = static_cast<int32_t>(scenario::resolved_ep(spec));
  e.expert_tp = static_cast<int32_t>(scenario::resolved_expert_tp(spec));
  e.domain_gpus = static_cast<int32_t>(scenario::nvlink_domain_gpus(spec.cluster()));
  add_expert_layout(layout, e, program);
}

void add_fp8_layout(const scenario::LoadedScenario& scenario, const RankLayout& layout, ir::Program& program) {
  const model::Fp8Plan p = model::fp8_plan(scenario.spec);
  if (!model::fp8_delayed_amax_reduction(p)) return;
  add_amax_layout(layout, program, p.tp_only_amax_reduction);
}

void fill_program_info(const scenario::LoadedScenario& scenario, const PipelinePlan& plan, const StageInputs& base,
                       scenario::ScheduleKind kind, ir::ProgramInfo& info) {
  const auto& spec = scenario.spec;
  const auto& par = spec.parallel();
  info.set_scenario_name(spec.name());
  info.set_scenario_file(scenario.path);
  info.set_lacuna_version(lacuna_version());
  info.set_num_ranks(plan.dims.world());
  info.set_tokens_per_iteration(plan.global_batch * spec.model().llm().seq_length());
  info.set_model_flops_per_iteration(
      model::model_flops_per_iteration(base.shape, spec.model().llm().num_layers(), plan.global_batch));
  // Block recompute repeats the first recompute_num_layers layers of each
  // virtual stage.
  int64_t recomputed_layers = -1;
  if (base.recompute == scenario::RECOMPUTE_FULL && base.recompute_num_layers > 0) {
    recomputed_layers = 0;
    for (const LayerRange& r : base.stages) recomputed_layers += std::min(r.count, base.recompute_num_layers);
  }
  info.set_hardware_flops_per_iteration(model::hardware_flops_per_iteration(
      base.shape, spec.model().llm().num_layers(), plan.global_batch, par.recompute(), recomputed_layers));
  const auto precision = spec.training().precision();  // validated: never UNSPECIFIED
  info.set_precision(precision);
  info.set_peak_flops_per_gpu(scenario::peak_flops_per_s(spec.cluster().gpu(), precision));
  if (precision == scenario::FP8) {
    // MFU on both peaks (docs/fp8.md#mfu): FP8 training is BF16 training with FP8 GEMMs.
    *info.mutable_fp8() = model::resolve_fp8(spec);
    info.set_peak_bf16_flops_per_gpu(scenario::peak_flops_per_s(spec.cluster().gpu(), scenario::BF16));
    info.set_peak_fp8_flops_per_gpu(scenario::peak_flops_per_s(spec.cluster().gpu(), scenario::FP8));
  }
  info.set_tp(plan.dims.tp);
  info.set_cp(plan.dims.cp);
  info.set_pp(plan.dims.pp);
  info.set_dp(plan.dims.dp);
  info.set_virtual_stages(base.pipeline.virtual_stages);
  info.set_num_microbatches(plan.microbatches);
  info.set_schedule(kind);
  info.set_global_batch(plan.global_batch);
  info.set_micro_batch(plan.micro_batch);
  info.set_seq_length(spec.model().llm().seq_length());
  info.set_recompute(base.recompute);
  info.set_sequence_parallel(base.shape.sequence_parallel);
  info.set_distributed_optimizer(base.distributed_optimizer);
  if (scenario.scale_down > 1) info.set_scale_down(scenario.scale_down);
  *info.mutable_execution() = base.execution;
  if (base.recompute_num_layers > 0) info.set_recompute_num_layers(base.recompute_num_layers);
  if (base.shape.moe.enabled()) {
    const auto& m = base.shape.moe;
    const scenario::Moe resolved = scenario::resolve_moe(spec);
    info.set_ep(static_cast<int32_t>(m.ep));
    info.set_expert_tp(static_cast<int32_t>(m.expert_tp));
    auto* moe = info.mutable_moe();
    moe->set_num_experts(static_cast<int32_t>(m.num_experts));
    moe->set_top_k(static_cast<int32_t>(m.top_k));
    moe->set_ep(static_cast<int32_t>(m.ep));
    moe->set_expert_tp(static_cast<int32_t>(m.expert_tp));
    moe->set_capacity_factor(m.capacity_factor);
    moe->set_pad_to_capacity(m.pad_to_capacity);
    moe->set_dispatcher(m.dispatcher);
    *moe->mutable_routing() = resolved.routing();
    moe->set_tokens_per_microbatch(model::moe_tokens(base.shape).routed);
  }
}

}  // namespace lacuna::compiler
