#include "sim/report/formats/names.h"

#include <fmt/format.h>

namespace lacuna::report {

std::string_view phase_letter(ir::Phase phase) {
  switch (phase) {
    case ir::FORWARD: return "F";
    case ir::BACKWARD_INPUT: return "B";
    case ir::BACKWARD_WEIGHT: return "W";
    case ir::RECOMPUTE: return "R";
    case ir::OPTIMIZER_STEP: return "opt";
    case ir::DP_SYNC: return "dp";
    default: return "?";
  }
}

std::string_view phase_key(ir::Phase phase) {
  switch (phase) {
    case ir::FORWARD: return "forward";
    case ir::BACKWARD_INPUT: return "backward_input";
    case ir::BACKWARD_WEIGHT: return "backward_weight";
    case ir::RECOMPUTE: return "recompute";
    case ir::OPTIMIZER_STEP: return "optimizer";
    case ir::DP_SYNC: return "dp_sync";
    default: return "unspecified";
  }
}

std::string_view role_name(ir::KernelRole role) {
  switch (role) {
    case ir::ROLE_NORM_ATTN: return "norm_attn";
    case ir::ROLE_QKV: return "qkv";
    case ir::ROLE_ATTN_CORE: return "attn";
    case ir::ROLE_ATTN_PROJ: return "proj";
    case ir::ROLE_RESIDUAL_ATTN: return "res_attn";
    case ir::ROLE_NORM_MLP: return "norm_mlp";
    case ir::ROLE_FC1: return "fc1";
    case ir::ROLE_ACT: return "act";
    case ir::ROLE_FC2: return "fc2";
    case ir::ROLE_RESIDUAL_MLP: return "res_mlp";
    case ir::ROLE_EMBEDDING: return "embedding";
    case ir::ROLE_FINAL_NORM: return "final_norm";
    case ir::ROLE_LOGITS: return "logits";
    case ir::ROLE_LOSS: return "loss";
    case ir::ROLE_OPTIMIZER_STEP: return "adam";
    case ir::ROLE_STAGE: return "stage";
    case ir::ROLE_ATTN_SCORES: return "attn_scores";
    case ir::ROLE_ATTN_SOFTMAX: return "attn_softmax";
    case ir::ROLE_ATTN_DROPOUT: return "attn_dropout";
    case ir::ROLE_ATTN_CONTEXT: return "attn_context";
    case ir::ROLE_FP8_CAST: return "fp8_cast";
    case ir::ROLE_FP8_AMAX: return "fp8_amax";
    default: return "";
  }
}

std::string_view op_class_name(ir::OpClass op_class) {
  switch (op_class) {
    case ir::GEMM: return "gemm";
    case ir::ATTENTION: return "attention";
    case ir::LAYERNORM: return "layernorm";
    case ir::RMSNORM: return "rmsnorm";
    case ir::GELU: return "gelu";
    case ir::SWIGLU: return "swiglu";
    case ir::RESIDUAL_ADD: return "residual_add";
    case ir::EMBEDDING: return "embedding";
    case ir::CROSS_ENTROPY: return "cross_entropy";
    case ir::OPTIMIZER: return "optimizer";
    case ir::ELEMENTWISE: return "elementwise";
    case ir::SOFTMAX: return "softmax";
    default: return "compute";
  }
}

std::string_view collective_short(ir::CollectiveKind kind) {
  switch (kind) {
    case ir::ALL_REDUCE: return "AR";
    case ir::ALL_GATHER: return "AG";
    case ir::REDUCE_SCATTER: return "RS";
    case ir::ALL_TO_ALL: return "A2A";
    case ir::BROADCAST: return "BC";
    case ir::REDUCE: return "RD";
    default: return "coll";
  }
}

std::string_view schedule_name(scenario::ScheduleKind kind) {
  switch (kind) {
    case scenario::GPIPE: return "GPipe";
    case scenario::ONE_F_ONE_B: return "1F1B";
    case scenario::INTERLEAVED_1F1B: return "interleaved 1F1B";
    case scenario::ZB_H1: return "ZB-H1";
    case scenario::CUSTOM: return "custom schedule";
    default: return "unspecified";
  }
}

std::string_view recompute_name(scenario::Recompute recompute) {
  switch (recompute) {
    case scenario::RECOMPUTE_SELECTIVE: return "selective";
    case scenario::RECOMPUTE_FULL: return "full";
    default: return "none";
  }
}

std::string_view precision_name(scenario::Precision precision) {
  switch (precision) {
    case scenario::BF16: return "bf16";
    case scenario::FP16: return "fp16";
    case scenario::FP8: return "fp8";
    case scenario::FP32: return "fp32";
    default: return "unspecified";
  }
}

std::string_view placement_name(scenario::PlacementKind kind) {
  switch (kind) {
    case scenario::MEGATRON_BASELINE: return "Megatron baseline";
    case scenario::MEGATRON_BALANCED: return "Megatron balanced";
    case scenario::OPTIMUS: return "Optimus";
    case scenario::HETEROGENEOUS: return "heterogeneous";
    case scenario::MEGATRON_ENCODER_PP: return "Megatron encoder PP";
    case scenario::MEGATRON_LAYER_SPLIT: return "Megatron layer split";
    default: return "unspecified";
  }
}

std::string placement_key(scenario::PlacementKind kind) {
  const std::string& name = scenario::PlacementKind_Name(kind);
  return name.empty() ? fmt::format("PLACEMENT_{}", static_cast<int>(kind)) : name;
}

std::string module_name(const ir::Program& program, int32_t module) {
  const ir::ProgramInfo& info = program.info();
  if (module >= 0 && module < info.modules_size() && !info.modules(module).name().empty()) {
    return info.modules(module).name();
  }
  return fmt::format("module {}", module);
}

std::string rank_label(const ir::Program& program, int32_t rank) {
  const ir::Coordinates& c = program.ranks(rank).coord();
  if (program.info().cp() > 1) {
    return fmt::format("rank {} (pp {} tp {} cp {} dp {})", rank, c.pp(), c.tp(), c.cp(), c.dp());
  }
  return fmt::format("rank {} (pp {} tp {} dp {})", rank, c.pp(), c.tp(), c.dp());
}

}  // namespace lacuna::report
