#include "sim/search/plan.h"

#include <fmt/format.h>

namespace lacuna::search {

const char* placement_name(Placement p) {
  switch (p) {
    case Placement::kNone: return "none";
    case Placement::kMegatronBaseline: return "megatron-baseline";
    case Placement::kMegatronBalanced: return "megatron-balanced";
    case Placement::kOptimus: return "optimus";
    case Placement::kHeteroColocated: return "hetero-colocated";
    case Placement::kHeteroNonColocated: return "hetero-non-colocated";
    case Placement::kMegatronEncoderPp: return "megatron-encoder-pp";
    case Placement::kMegatronLayerSplit: return "megatron-layer-split";
  }
  return "?";
}

scenario::PlacementKind placement_kind(Placement p) {
  switch (p) {
    case Placement::kNone: return scenario::PLACEMENT_UNSPECIFIED;
    case Placement::kMegatronBaseline: return scenario::MEGATRON_BASELINE;
    case Placement::kMegatronBalanced: return scenario::MEGATRON_BALANCED;
    case Placement::kOptimus: return scenario::OPTIMUS;
    case Placement::kHeteroColocated:
    case Placement::kHeteroNonColocated: return scenario::HETEROGENEOUS;
    case Placement::kMegatronEncoderPp: return scenario::MEGATRON_ENCODER_PP;
    case Placement::kMegatronLayerSplit: return scenario::MEGATRON_LAYER_SPLIT;
  }
  return scenario::PLACEMENT_UNSPECIFIED;
}

namespace {
const char* recompute_token(scenario::Recompute r) {
  switch (r) {
    case scenario::RECOMPUTE_SELECTIVE: return "rc-sel";
    case scenario::RECOMPUTE_FULL: return "rc-full";
    default: return "rc-none";
  }
}

const char* schedule_token(scenario::ScheduleKind k) {
  switch (k) {
    case scenario::GPIPE: return "gpipe";
    case scenario::INTERLEAVED_1F1B: return "interleaved";
    case scenario::ZB_H1: return "zb-h1";
    default: return "1f1b";
  }
}
}  // namespace

scenario::Scenario apply_plan(const scenario::Scenario& base, const Plan& plan) {
  scenario::Scenario s = base;
  s.mutable_cluster()->set_num_nodes(plan.num_nodes);
  auto* p = s.mutable_parallel();
  p->set_tp(plan.tp);
  p->set_sequence_parallel(plan.sequence_parallel);
  p->set_cp(plan.cp);
  p->set_pp(plan.pp);
  p->set_dp(plan.dp);
  p->set_virtual_stages(plan.virtual_stages);
  p->clear_layers_per_stage();
  p->clear_first_stage_layers();
  p->clear_last_stage_layers();
  if (plan.split == LayerSplit::kLightLast) p->set_last_stage_layers(plan.last_stage_layers);
  p->set_distributed_optimizer(plan.distributed_optimizer);
  p->set_recompute(plan.recompute);
  p->set_recompute_num_layers(0);
  p->set_overlap_grad_reduce(plan.dp_overlap);
  p->set_overlap_param_gather(plan.dp_overlap && plan.distributed_optimizer);
  if (plan.ep > 0) {
    p->set_ep(plan.ep);
    p->set_expert_tp(plan.expert_tp);
  }
  s.mutable_schedule()->set_kind(plan.schedule);
  // A plan's schedule is a built-in one: the base's CUSTOM order was written
  // for the base's pipeline shape, which the plan changes.
  s.mutable_schedule()->clear_actions_file();
  // Likewise a microbatch group size fits the base's pp and microbatches:
  // plans use Megatron-LM's default (pp).
  s.mutable_parallel()->clear_microbatch_group_size_per_vp_stage();
  s.mutable_training()->set_micro_batch(plan.micro_batch);
  auto* x = s.mutable_execution();
  x->set_tp_comm_overlap(plan.tp_comm_overlap);
  x->clear_tp_comm_overlap_chunks();
  if (plan.pp > 1) {
    x->set_pipeline_p2p(plan.p2p_overlapped ? scenario::P2P_OVERLAPPED : scenario::P2P_BLOCKING);
  } else {
    x->set_pipeline_p2p(scenario::P2P_UNSPECIFIED);
  }
  // A multimodal plan keeps the scenario's own placement kind: each
  // placement is built from it as `lacuna compare` builds it
  // (placement::compile_as, choose_heterogeneous).
  return s;
}

std::string describe(const Plan& plan) {
  std::string out = fmt::format("tp{}{} cp{} pp{}", plan.tp, plan.sequence_parallel ? " sp" : "", plan.cp, plan.pp);
  if (plan.split == LayerSplit::kLightLast) out += fmt::format(" last{}", plan.last_stage_layers);
  if (plan.virtual_stages > 1) out += fmt::format(" v{}", plan.virtual_stages);
  out += fmt::format(" dp{}", plan.dp);
  if (plan.ep > 0) out += fmt::format(" ep{} etp{}", plan.ep, plan.expert_tp);
  out += fmt::format(" mb{} {}", plan.micro_batch, recompute_token(plan.recompute));
  if (plan.distributed_optimizer) out += " dist-opt";
  if (plan.dp_overlap) out += " dp-ovl";
  if (plan.tp_comm_overlap) out += " tp-ovl";
  if (plan.pp > 1) out += plan.p2p_overlapped ? " p2p-ovl" : " p2p-blk";
  out += " ";
  out += schedule_token(plan.schedule);
  if (plan.placement != Placement::kNone) {
    out += " ";
    out += placement_name(plan.placement);
  }
  return out;
}

}  // namespace lacuna::search
