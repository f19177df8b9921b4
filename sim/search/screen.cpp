#include "sim/search/screen.h"

#include <algorithm>
#include <cmath>

#include "sim/compiler/segment_inputs.h"
#include "sim/cost/memory.h"
#include "sim/cost/memory_peak.h"
#include "sim/model/accounting.h"
#include "sim/model/fp8.h"
#include "sim/model/layer.h"
#include "sim/model/mllm.h"
#include "sim/model/moe.h"
#include "sim/scenario/execution.h"
#include "sim/scenario/nvlink_domain.h"

namespace lacuna::search {
namespace {

// A group of `size` ranks `stride` apart under Megatron's default order
// (tp-cp-dp-pp): how many nodes it spans and how many members share one.
cost::GroupShape strided_group(int64_t size, int64_t stride, int64_t gpus_per_node) {
  cost::GroupShape g;
  g.size = static_cast<int32_t>(size);
  if (stride >= gpus_per_node) {
    g.nodes = static_cast<int32_t>(size);
    g.max_ranks_per_node = 1;
    return g;
  }
  const int64_t per_node = std::max<int64_t>(1, std::min<int64_t>(size, gpus_per_node / stride));
  g.nodes = static_cast<int32_t>((size + per_node - 1) / per_node);
  g.max_ranks_per_node = static_cast<int32_t>(per_node);
  return g;
}

// The NCCL communicators a rank belongs to, as compiler/memory_overheads.h
// counts them from the rank layout (compiler/rank_layout.h): each distinct
// rank set among its tp, cp, dp, dp_cp, tied-embedding and gradient-norm
// groups, plus one for pipeline p2p. A group is the set of axes it spans,
// axes of size 1 dropped, so coinciding groups (dp_cp = dp at cp 1) count once.
int64_t rank_communicators(const Plan& p) {
  enum : unsigned { kTp = 1, kCp = 2, kDp = 4, kPp = 8, kPpEnds = 16 };
  auto reduce = [&](unsigned axes) {
    unsigned out = 0;
    if ((axes & kTp) && p.tp > 1) out |= kTp;
    if ((axes & kCp) && p.cp > 1) out |= kCp;
    if ((axes & kDp) && p.dp > 1) out |= kDp;
    if ((axes & kPp) && p.pp > 1) out |= kPp;
    return out;
  };
  std::vector<unsigned> sets = {reduce(kTp), reduce(kCp), reduce(kDp), reduce(kDp | kCp),
                                // the gradient norm: tp × pp ranks, or every rank with the distributed optimizer
                                reduce(p.distributed_optimizer ? (kTp | kCp | kDp | kPp) : (kTp | kPp))};
  // The embedding group joins the first and last stage: the whole pipeline
  // axis only when pp = 2.
  if (p.pp > 1) sets.push_back(p.pp == 2 ? kPp : kPpEnds);
  std::sort(sets.begin(), sets.end());
  sets.erase(std::unique(sets.begin(), sets.end()), sets.end());
  const int64_t groups = static_cast<int64_t>(std::count_if(sets.begin(), sets.end(), [](unsigned s) { return s != 0; }));
  return groups + (p.pp > 1 ? 1 : 0);
}

}  // namespace

int64_t Screen::moe_communicators(const Plan& p) const {
  // The compiler lists each MoE group once per kind, even where its ranks
  // equal a dense group's (compiler/rank_layout.cpp add_expert_layout), and
  // counts a communicator per distinct group (compiler/memory_overheads.cpp):
  // EP, expert TP, expert DP, and the EP ranks inside and across NVLink
  // domains, each when it has more than one rank.
  const int64_t etp = std::max<int64_t>(1, p.expert_tp), ep = std::max<int64_t>(1, p.ep);
  const int64_t stage = int64_t{p.tp} * p.cp * p.dp;
  const int64_t edp = std::max<int64_t>(1, stage / (ep * etp));
  const int64_t domain = std::max<int64_t>(1, scenario::nvlink_domain_gpus(base_.cluster()));
  int64_t intra = std::clamp<int64_t>(domain / etp, 1, ep);
  while (ep % intra != 0) --intra;
  return (ep > 1 ? 1 : 0) + (etp > 1 ? 1 : 0) + (edp > 1 ? 1 : 0) + (intra > 1 ? 1 : 0) + (ep / intra > 1 ? 1 : 0);
}

Screen::Screen(const scenario::Scenario& base)
    : base_(base), cost_(cost::make_analytic_cost_model(base.cluster(), base.training().precision())) {
  peak_flops_ = scenario::peak_flops_per_s(base.cluster().gpu(), base.training().precision());
  gemm_efficiency_ = scenario::op_efficiency(base.cluster().gpu(), "GEMM").flops;
  const model::LayerShape shape = model::layer_shape(base);
  moe_ = shape.moe;
  fp8_ = shape.fp8;
  model_flops_ = model::model_flops_per_iteration(model::unsharded(shape, 1), base.model().llm().num_layers(),
                                                  base.training().global_batch());
  for (int e = 0; e < base.model().encoders_size(); ++e) {
    encoder_flops_ += model::encoder_model_flops_per_iteration(base, e, base.training().global_batch());
    (base.model().encoders(e).frozen() ? encoder_frozen_params_ : encoder_trained_params_) +=
        static_cast<double>(model::encoder_parameters(base, e));
  }
  grad_reduce_fp32_ = scenario::resolve_execution(base, scenario::SourceMap{}).grad_reduce_in_fp32();
  const auto& mo = base.cluster().memory_overheads();
  cuda_context_bytes_ = mo.cuda_context_gib() * 1024.0 * 1024.0 * 1024.0;
  nccl_communicator_bytes_ = mo.nccl_communicator_mib() * 1024.0 * 1024.0;
  fragmentation_ = cost::allocator_fragmentation(base.cluster());
}

int64_t Screen::moe_layers(int64_t first, int64_t n) const {
  int64_t count = 0;
  for (int64_t l = first; l < first + n; ++l) count += moe_.is_moe_layer(l) ? 1 : 0;
  return count;
}

const Screen::LayerFigures& Screen::layer(const Plan& plan, bool moe_layer) {
  const ShapeKey key{plan.tp, plan.cp, plan.sequence_parallel, plan.micro_batch, static_cast<int>(plan.recompute),
                     plan.tp_comm_overlap, plan.pp > 1, plan.ep, plan.expert_tp, moe_layer};
  if (auto it = layers_.find(key); it != layers_.end()) return it->second;
  // The plan's scenario, only to read the layer's shape as the compiler does.
  Plan probe = plan;
  probe.pp = plan.pp > 1 ? 2 : 1;
  const scenario::Scenario spec = apply_plan(base_, probe);
  model::LayerShape s = model::layer_shape(spec);
  s.moe_layer = moe_layer;
  // Groups are local within an NVLink domain (a node on HGX/DGX, a rack on
  // NVL72): the analytic model's "node" is the domain (docs/network.md).
  const int64_t gpn = scenario::nvlink_domain_gpus(base_.cluster());
  const cost::GroupShape tp_group = strided_group(plan.tp, 1, gpn);
  const cost::GroupShape cp_group = strided_group(plan.cp, plan.tp, gpn);
  // MoE groups under Megatron-Core's expert order (tp-ep-dp): expert TP
  // innermost, an EP group's members expert_tp apart (docs/moe.md).
  const int64_t etp = std::max<int64_t>(1, s.moe.expert_tp), ep = std::max<int64_t>(1, s.moe.ep);
  const int64_t per_domain = std::max<int64_t>(1, s.moe.ep_per_domain);
  const cost::GroupShape expert_tp_group = strided_group(etp, 1, gpn);
  const cost::GroupShape ep_group = strided_group(ep, etp, gpn);
  const cost::GroupShape ep_intra_group = strided_group(per_domain, etp, gpn);
  const cost::GroupShape ep_inter_group = strided_group(ep / per_domain, etp * per_domain, gpn);
  LayerFigures f;
  auto add = [&](const std::vector<model::Step>& steps, double& compute_s, double* weight_s) {
    for (const model::Step& step : steps) {
      if (const auto* k = std::get_if<model::Kernel>(&step)) {
        const double t = cost_->compute(model::to_compute(*k)).seconds();
        compute_s += t;
        if (weight_s != nullptr && k->phase == ir::BACKWARD_WEIGHT) *weight_s += t;
        if (k->op_class == ir::ATTENTION) f.attention_s += t;
      } else {
        const auto& c = std::get<model::CommPoint>(step);
        const bool tp = c.group == model::CommGroup::kTp;
        const bool cp = c.group == model::CommGroup::kCp;
        const cost::GroupShape& g = tp                                          ? tp_group
                                    : cp                                        ? cp_group
                                    : c.group == model::CommGroup::kExpertTp    ? expert_tp_group
                                    : c.group == model::CommGroup::kEpIntraDomain ? ep_intra_group
                                    : c.group == model::CommGroup::kEpInterDomain ? ep_inter_group
                                                                                : ep_group;
        if (g.size <= 1) continue;
        const double t = cost_->collective(c.kind, c.bytes, g).seconds();
        (tp ? f.tp_comm_s : cp ? f.cp_comm_s : f.ep_comm_s) += t;
      }
    }
  };
  add(model::layer_forward(s), f.forward_s, nullptr);
  const double forward_tp_s = f.tp_comm_s;
  add(model::layer_backward(s, plan.recompute), f.backward_s, &f.weight_grad_s);
  // Backward: Megatron-LM overlaps each linear layer's input-gradient
  // collective with its weight-gradient GEMM (layer.h, Consumer), so only
  // what the weight gradients cannot hide stays exposed.
  f.tp_comm_s = forward_tp_s + std::max(0.0, f.tp_comm_s - forward_tp_s - f.weight_grad_s);
  double unused = 0;
  const double layer_attention_s = f.attention_s;
  add(model::embedding_forward(s), f.embedding_s, nullptr);
  add(model::embedding_backward(s), f.embedding_s, &unused);
  add(model::head_forward(s), f.head_s, nullptr);
  add(model::head_backward(s), f.head_s, &unused);
  // With TP overlap the collectives run under the GEMM pieces; the first
  // piece's share stays exposed (tp pieces for all-gathers, Transformer
  // Engine's default).
  if (plan.tp_comm_overlap) f.tp_comm_s /= std::max<int32_t>(plan.tp, 2);
  // Megatron-LM's p2p tensor: micro_batch × seq / cp × hidden, 2 bytes; with
  // sequence parallelism each TP rank sends its 1/tp.
  f.p2p_bytes = static_cast<double>(s.micro_batch) * static_cast<double>(s.seq_per_rank()) *
                static_cast<double>(s.hidden) * 2.0 / (plan.sequence_parallel ? plan.tp : 1);
  f.layer_params = model::layer_parameters(s);
  if (moe_layer) {
    // The MoE MLP in place of the dense one (sim/model/moe.h).
    f.layer_params += model::moe_mlp_parameters(s) - model::dense_mlp_parameters(s);
    f.expert_params = model::moe_routed_expert_parameters(s);
  }
  f.embedding_params = model::embedding_parameters(s);
  f.head_params = model::head_parameters(s);
  f.layer_activation = cost::layer_activation_bytes(compiler::activation_inputs(s, plan.recompute));
  if (moe_layer && plan.recompute != scenario::RECOMPUTE_FULL) {
    f.layer_activation += Bytes(model::moe_mlp_activation_bytes(s) - model::dense_mlp_activation_bytes(s));
  }
  f.head_activation = model::head_activation_bytes(s);
  // FP8: the cached FP8 weight copies (or, with param_gather, FP8 weights in
  // place of bf16 ones), as the compiler's memory baseline counts them.
  f.fp8_weight_delta = model::fp8_weight_memory_delta_bytes(s.fp8, model::fp8_layer_weights(s).total());
  f.fp8_gemms = model::fp8_layer_gemms(s);
  f.grad_fp32 = s.grad_fp32;
  f.attention_s = layer_attention_s;
  return layers_.emplace(key, f).first->second;
}

double Screen::optimizer_s(int64_t parameters) {
  if (auto it = optimizer_.find(parameters); it != optimizer_.end()) return it->second;
  double t = 0;
  for (const model::Kernel& k : model::optimizer_update(parameters)) t += cost_->compute(model::to_compute(k)).seconds();
  optimizer_.emplace(parameters, t);
  return t;
}

int64_t Screen::amax_group_size(const Plan& plan) const {
  if (!model::fp8_delayed_amax_reduction(fp8_)) return 1;
  return int64_t{plan.tp} * plan.cp * (fp8_.tp_only_amax_reduction ? 1 : plan.dp);
}

// Per model chunk, a forward and a backward reduction of all the rank's
// amaxes over the amax group (its ranks consecutive under tp-cp-dp-pp), each
// followed by the fused update (docs/fp8.md#delayed-scaling-amax-reduction).
double Screen::amax_s(const Plan& plan, int64_t gemms) const {
  if (!model::fp8_delayed_amax_reduction(fp8_) || gemms <= 0) return 0;
  const int64_t size = amax_group_size(plan);
  const cost::GroupShape group = strided_group(size, 1, scenario::nvlink_domain_gpus(base_.cluster()));
  double t = 0;
  for (const bool forward : {true, false}) {
    const int64_t values = model::fp8_delayed_amax_values(gemms, forward);
    if (size > 1) t += cost_->collective(ir::ALL_REDUCE, values * model::kFp32, group).seconds();
    const ir::Phase phase = forward ? ir::FORWARD : ir::BACKWARD_INPUT;
    t += cost_->compute(model::to_compute(model::fp8_amax_update(phase, values, fp8_.amax_history_len))).seconds();
  }
  return static_cast<double>(plan.virtual_stages) * t;
}

ScreenEstimate Screen::estimate(const Plan& plan) {
  const LayerFigures& f = layer(plan);
  const int64_t gpn = base_.cluster().gpus_per_node();
  const int64_t domain = scenario::nvlink_domain_gpus(base_.cluster());
  const int64_t layers = base_.model().llm().num_layers();
  const int64_t pp = plan.pp, v = plan.virtual_stages;
  const int64_t m = std::max<int64_t>(1, base_.training().global_batch() / (int64_t{plan.micro_batch} * plan.dp));
  // Layers of the first and the last pipeline rank.
  int64_t first_layers = layers / pp, last_layers = layers / pp;
  if (plan.split == LayerSplit::kLightLast) {
    last_layers = plan.last_stage_layers;
    first_layers = (layers - last_layers) / (pp - 1);
  }
  // Ring attention passes the KV chunks while the attention kernels run:
  // what they cannot hide stays exposed.
  const double cp_exposed = std::max(0.0, f.cp_comm_s - f.attention_s);
  const double per_layer = f.forward_s + f.backward_s + f.tp_comm_s + cp_exposed;
  // Work of one microbatch on each pipeline rank (forward + backward).
  double w_first = static_cast<double>(first_layers) * per_layer + f.embedding_s;
  double w_last = static_cast<double>(last_layers) * per_layer + f.head_s;
  if (pp == 1) w_first = w_last = static_cast<double>(layers) * per_layer + f.embedding_s + f.head_s;
  double w_mid = static_cast<double>(first_layers) * per_layer;
  double w_weight = static_cast<double>(first_layers) * f.weight_grad_s;
  // MoE (docs/search.md#moe): each stage's MoE layers at the MoE layer's
  // figures (expert GEMMs on the tokens·top_k its EP rank receives, the
  // dispatch and combine as the dispatcher moves them), its dense layers at
  // the dense ones; the middle stages at the model's mix.
  const bool moe = moe_.enabled() && plan.ep > 0;
  const LayerFigures& fm = moe ? layer(plan, true) : f;
  const double per_moe_layer = moe ? fm.forward_s + fm.backward_s + fm.tp_comm_s +
                                         std::max(0.0, fm.cp_comm_s - fm.attention_s) + fm.ep_comm_s
                                   : per_layer;
  const int64_t moe_first = moe ? moe_layers(0, pp == 1 ? layers : first_layers) : 0;
  const int64_t moe_last = moe ? moe_layers(layers - last_layers, last_layers) : 0;
  const int64_t moe_all = moe ? moe_layers(0, layers) : 0;
  if (moe) {
    auto work = [&](int64_t n, int64_t n_moe) {
      return static_cast<double>(n - n_moe) * per_layer + static_cast<double>(n_moe) * per_moe_layer;
    };
    w_first = work(first_layers, moe_first) + f.embedding_s;
    w_last = work(last_layers, moe_last) + f.head_s;
    if (pp == 1) w_first = w_last = work(layers, moe_all) + f.embedding_s + f.head_s;
    w_mid = work(layers, moe_all) * static_cast<double>(first_layers) / static_cast<double>(layers);
    w_weight = static_cast<double>(first_layers - moe_first) * f.weight_grad_s +
               static_cast<double>(moe_first) * fm.weight_grad_s;
  }

  // FP8 delayed scaling: each microbatch's amax reductions, on every stage
  // (counted with the first stage's FP8 GEMMs).
  if (const double amax = amax_s(plan, (first_layers - moe_first) * f.fp8_gemms + moe_first * fm.fp8_gemms); amax > 0) {
    w_first += amax;
    w_last += amax;
    w_mid += amax;
  }

  // Encoder work per GPU at the GEMM rate, placed as each placement does
  // (docs/search.md#the-screen).
  const int64_t llm_gpus = plan.dp * plan.tp * plan.cp * plan.pp;
  const double encoder_s = encoder_flops_ / (static_cast<double>(llm_gpus) * peak_flops_ * gemm_efficiency_);
  switch (plan.placement) {
    case Placement::kMegatronBaseline:
      // On the first pipeline stage only: its 1/pp of the GPUs do it all.
      w_first += encoder_s * static_cast<double>(pp) / static_cast<double>(m);
      if (pp == 1) w_last = w_first;
      break;
    case Placement::kMegatronBalanced:
    case Placement::kMegatronLayerSplit:
      w_first += encoder_s / static_cast<double>(m);
      w_last += encoder_s / static_cast<double>(m);
      break;
    default: break;
  }
  const double w_max = std::max({w_first, w_last, w_mid});
  const double w_sum = w_first + w_last + static_cast<double>(std::max<int64_t>(0, pp - 2)) * w_mid;
  double pipeline = 0;
  switch (plan.schedule) {
    case scenario::INTERLEAVED_1F1B:
      pipeline = static_cast<double>(m) * w_max + (w_sum - w_max) / static_cast<double>(v);
      break;
    case scenario::ZB_H1:
      // Zero-bubble H1 (Qi et al. 2024): the fill and drain shrink by the
      // deferred weight gradients, (p−1)(T_F + T_B − T_W) against 1F1B's
      // (p−1)(T_F + T_B + T_W).
      pipeline = static_cast<double>(m) * w_max +
                 std::max(0.0, (w_sum - w_max) - 2.0 * static_cast<double>(pp - 1) * w_weight);
      break;
    default:
      pipeline = static_cast<double>(m - 1) * w_max + w_sum;
      break;
  }
  if (pp == 1) pipeline = static_cast<double>(m) * w_first;
  ScreenEstimate out;
  out.bubble_s = pipeline - static_cast<double>(m) * w_max;

  // Pipeline p2p: one activation each way per microbatch and stage boundary.
  double exposed = static_cast<double>(m) * (static_cast<double>(layers) / static_cast<double>(pp)) *
                   (f.tp_comm_s + cp_exposed);
  if (moe) {
    const double moe_comm = fm.tp_comm_s + std::max(0.0, fm.cp_comm_s - fm.attention_s) + fm.ep_comm_s;
    exposed = static_cast<double>(m) / static_cast<double>(pp) *
              (static_cast<double>(layers - moe_all) * (f.tp_comm_s + cp_exposed) + static_cast<double>(moe_all) * moe_comm);
  }
  if (pp > 1) {
    const bool same_node = int64_t{plan.tp} * plan.cp * plan.dp < domain;  // next stage in the same NVLink domain
    const double p2p = cost_->p2p(static_cast<int64_t>(f.p2p_bytes), same_node).seconds();
    const double transfers = plan.p2p_overlapped ? 2.0 * static_cast<double>(pp - 1) * static_cast<double>(v)
                                                 : 2.0 * static_cast<double>(m * v + pp - 1);
    pipeline += transfers * p2p;
    exposed += transfers * p2p;
  }

  // Data parallelism: gradients reduced (reduce-scatter with the distributed
  // optimizer, else all-reduce), parameters all-gathered back; with overlap
  // only the last bucket or model chunk stays exposed.
  int64_t stage_params = std::max(static_cast<int64_t>(first_layers) * f.layer_params + f.embedding_params,
                                  static_cast<int64_t>(last_layers) * f.layer_params + f.head_params);
  // MoE: the stages' parameters with their MoE layers, and of those the
  // routed experts', whose gradients reduce (and whose distributed-optimizer
  // state shards) over the expert-DP group, tp·cp·dp / (ep·expert_tp) ranks
  // expert_tp·ep apart (Megatron-Core's expert order tp-ep-dp).
  int64_t first_expert = 0, last_expert = 0, stage_expert = 0;
  int64_t first_params = static_cast<int64_t>(pp == 1 ? layers : first_layers) * f.layer_params + f.embedding_params;
  int64_t last_params = static_cast<int64_t>(last_layers) * f.layer_params + f.head_params;
  if (pp == 1) first_params = stage_params;
  const int64_t expert_dp =
      moe ? std::max<int64_t>(1, int64_t{plan.tp} * plan.cp * plan.dp / (int64_t{plan.ep} * std::max(plan.expert_tp, 1))) : 1;
  if (moe) {
    const int64_t extra = fm.layer_params - f.layer_params;
    first_params += moe_first * extra;
    last_params += moe_last * extra;
    if (pp == 1) {
      const int64_t all = static_cast<int64_t>(layers) * f.layer_params + moe_all * extra;
      first_params = last_params = all + std::max(f.embedding_params, f.head_params);
    }
    first_expert = moe_first * fm.expert_params;
    last_expert = (pp == 1 ? moe_first : moe_last) * fm.expert_params;
    stage_params = std::max(first_params, last_params);
    stage_expert = first_params >= last_params ? first_expert : last_expert;
  }
  double dp_s = 0;
  const int64_t replicas = plan.dp * plan.cp;
  if (replicas > 1 || expert_dp > 1) {
    auto sync = [&](int64_t params, const cost::GroupShape& group) {
      if (group.size <= 1 || params <= 0) return 0.0;
      const int64_t grad_bytes = params * (grad_reduce_fp32_ ? 4 : 2);
      if (plan.distributed_optimizer) {
        return cost_->collective(ir::REDUCE_SCATTER, grad_bytes, group).seconds() +
               cost_->collective(ir::ALL_GATHER, params * 2, group).seconds();
      }
      return cost_->collective(ir::ALL_REDUCE, grad_bytes, group).seconds();
    };
    const cost::GroupShape g = strided_group(replicas, plan.tp, domain);
    if (!moe) {
      dp_s = sync(stage_params, g);
    } else {
      dp_s = sync(stage_params - stage_expert, g) +
             sync(stage_expert, strided_group(expert_dp, int64_t{plan.ep} * std::max(plan.expert_tp, 1), domain));
    }
    if (plan.dp_overlap) {
      // Megatron-LM's buckets: max(40M, 1M·dp) parameters.
      const double bucket = std::max(4e7, 1e6 * static_cast<double>(replicas));
      const double buckets = std::max(1.0, std::ceil(static_cast<double>(stage_params) / bucket));
      dp_s /= std::max(static_cast<double>(v), buckets);
    }
  }
  exposed += dp_s;
  int64_t optimizer_params = plan.distributed_optimizer ? (stage_params + replicas - 1) / replicas : stage_params;
  if (moe && plan.distributed_optimizer) {
    optimizer_params = (stage_params - stage_expert + replicas - 1) / replicas + (stage_expert + expert_dp - 1) / expert_dp;
  }
  const double optimizer = optimizer_s(optimizer_params);
  double iteration = pipeline + dp_s + optimizer;
  int64_t gpus = llm_gpus;
  switch (plan.placement) {
    case Placement::kOptimus:
      // Optimus (ATC'25) moves encoder kernels into the LLM's bubbles, but
      // how much it hides depends on its plan and schedule, which only the
      // planner and the simulation know (lacuna's Optimus hides a few per
      // cent on the shipped ViT-22B scenarios, docs/results.md): the screen
      // counts none hidden and lets the simulation find what is.
      iteration += encoder_s;
      break;
    case Placement::kHeteroColocated:
      iteration += encoder_s;  // its own phases, on every GPU
      break;
    case Placement::kMegatronEncoderPp: {
      // Its stages on the GPUs after the LLM's, one pipeline ahead of it:
      // the slower of the two sets the pace.
      const int64_t island = plan.gpus(gpn) - llm_gpus;
      iteration = std::max(iteration, encoder_s * static_cast<double>(llm_gpus) / static_cast<double>(std::max<int64_t>(1, island)));
      gpus = plan.gpus(gpn);
      break;
    }
    case Placement::kHeteroNonColocated: {
      // On GPUs of its own, as many as keep pace with the LLM (whole nodes).
      const double share = encoder_s / std::max(iteration, 1e-12);
      const int64_t nodes = static_cast<int64_t>(std::ceil(share * static_cast<double>(plan.num_nodes)));
      gpus += std::max<int64_t>(1, nodes) * gpn;
      break;
    }
    default: break;
  }
  out.iteration_s = iteration;
  out.gpus = gpus;
  out.exposed_comm_s = exposed;
  out.tokens_per_s = static_cast<double>(base_.training().global_batch()) *
                     static_cast<double>(base_.model().llm().seq_length()) / iteration;
  out.mfu = (model_flops_ + encoder_flops_) / (iteration * static_cast<double>(gpus) * peak_flops_);

  // Memory of the first and the last pipeline rank (docs/memory-model.md):
  // model state, CUDA context and NCCL buffers, and the activations the
  // schedule keeps in flight.
  int64_t in_flight_layers_first = 0;
  const int64_t chunk_layers = first_layers / v;
  switch (plan.schedule) {
    case scenario::GPIPE: in_flight_layers_first = m * first_layers; break;
    case scenario::INTERLEAVED_1F1B: {
      // Megatron-LM's warm-up on pipeline rank 0: (pp − 1)·2 + (v − 1)·pp
      // model-chunk forwards, then one more before the first backward.
      const int64_t chunks = std::min<int64_t>(m * v, (pp - 1) * 2 + (v - 1) * pp + 1);
      in_flight_layers_first = chunks * chunk_layers;
      break;
    }
    default: in_flight_layers_first = std::min<int64_t>(pp, m) * first_layers; break;
  }
  // Delayed scaling's amax group is listed apart from the dense groups
  // (compiler add_amax_layout), so it is a communicator of its own.
  const int64_t communicators = rank_communicators(plan) + (amax_group_size(plan) > 1 ? 1 : 0);
  const double other = cuda_context_bytes_ + nccl_communicator_bytes_ * static_cast<double>(communicators);
  const int64_t grad_bytes = f.grad_fp32 ? 4 : 2;
  auto state = [&](int64_t params) {
    const cost::ModelStateBytes st = cost::model_state_bytes(params, replicas, plan.distributed_optimizer, grad_bytes);
    return static_cast<double>(st.weights.count() + st.gradients.count() + st.optimizer.count());
  };
  // MoE: which layers are in flight is the schedule's business, so the
  // bound takes the smaller of the dense and the MoE layer's activations.
  const double layer_act = static_cast<double>(
      moe ? std::min(f.layer_activation.count(), fm.layer_activation.count()) : f.layer_activation.count());
  const double act_first = static_cast<double>(in_flight_layers_first) * layer_act;
  const double act_last = static_cast<double>(last_layers) * layer_act;
  double bound_first = 0, bound_last = 0;
  if (!moe) {
    const double first_stage = static_cast<double>(pp == 1 ? stage_params : first_layers * f.layer_params + f.embedding_params);
    bound_first = state(static_cast<int64_t>(first_stage)) + other + act_first;
    bound_last = pp == 1 ? bound_first
                         : state(static_cast<int64_t>(last_layers) * f.layer_params + f.head_params) + other + act_last;
  } else {
    // The routed experts' state shards over expert DP, the rest over DP.
    auto moe_state = [&](int64_t params, int64_t expert) {
      const cost::ModelStateBytes e =
          cost::model_state_bytes(expert, expert_dp, plan.distributed_optimizer, grad_bytes);
      return state(params - expert) + static_cast<double>(e.weights.count() + e.gradients.count() + e.optimizer.count());
    };
    bound_first = moe_state(first_params, first_expert) + other + act_first;
    bound_last = pp == 1 ? bound_first : moe_state(last_params, last_expert) + other + act_last;
  }
  // FP8 weight copies of the stage's layers (exact, so the bound stays one).
  auto fp8_weights = [&](int64_t n, int64_t n_moe) {
    return static_cast<double>((n - n_moe) * f.fp8_weight_delta + n_moe * fm.fp8_weight_delta);
  };
  bound_first += fp8_weights(pp == 1 ? layers : first_layers, moe_first);
  bound_last += pp == 1 ? fp8_weights(layers, moe_first) : fp8_weights(last_layers, moe_last);
  out.memory_lower_bound = Bytes(static_cast<int64_t>(std::max(bound_first, bound_last)));
  const double head_act = static_cast<double>(f.head_activation.count());
  // The estimate adds the allocator's reserve, the head's activations and
  // the encoders' model state where the placement keeps it on the LLM's
  // GPUs: sharded over the LLM's TP on the first stage (Megatron baseline),
  // over TP and the stages (balanced, layer split, Optimus, heterogeneous
  // colocated); none on the LLM's GPUs with an island of its own.
  double encoder_state = 0;
  if (encoder_trained_params_ + encoder_frozen_params_ > 0) {
    auto bytes = [&](double params) {
      const int64_t p = static_cast<int64_t>(params);
      const cost::ModelStateBytes st = cost::model_state_bytes(p, replicas, plan.distributed_optimizer, grad_bytes);
      return static_cast<double>(st.weights.count() + st.gradients.count() + st.optimizer.count());
    };
    const double trained = bytes(encoder_trained_params_ / plan.tp);
    const double frozen = 2.0 * encoder_frozen_params_ / plan.tp;
    switch (plan.placement) {
      case Placement::kMegatronBaseline: encoder_state = trained + frozen; break;
      case Placement::kMegatronBalanced:
      case Placement::kMegatronLayerSplit:
      case Placement::kOptimus:
      case Placement::kHeteroColocated: encoder_state = (trained + frozen) / static_cast<double>(pp); break;
      default: break;
    }
  }
  // MoE: the estimate takes the stage's own mix of dense and MoE layers for
  // the activations in flight (the bound keeps the smaller of the two).
  double est_act_first = act_first, est_act_last = act_last;
  if (moe) {
    auto mixed = [&](int64_t n, int64_t n_moe) {
      if (n <= 0) return layer_act;
      return (static_cast<double>(n - n_moe) * static_cast<double>(f.layer_activation.count()) +
              static_cast<double>(n_moe) * static_cast<double>(fm.layer_activation.count())) /
             static_cast<double>(n);
    };
    est_act_first = static_cast<double>(in_flight_layers_first) * mixed(pp == 1 ? layers : first_layers, moe_first);
    est_act_last = static_cast<double>(last_layers) * mixed(last_layers, pp == 1 ? moe_first : moe_last);
  }
  const double est_first = bound_first + (est_act_first - act_first) + fragmentation_ * est_act_first +
                           (pp == 1 ? head_act : 0) + encoder_state;
  const double est_last = bound_last + (est_act_last - act_last) + fragmentation_ * est_act_last + head_act +
                          (plan.placement == Placement::kMegatronBaseline ? 0.0 : encoder_state);
  // MoE: the estimate adds the expert groups' communicators (EP, expert TP,
  // expert DP, and the EP ranks inside and across NVLink domains); the bound
  // leaves them out.
  const double moe_other = moe ? nccl_communicator_bytes_ * static_cast<double>(moe_communicators(plan)) : 0.0;
  out.memory = Bytes(static_cast<int64_t>(std::max(est_first, est_last) + moe_other));
  return out;
}

}  // namespace lacuna::search
