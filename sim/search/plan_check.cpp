#include "sim/search/plan_check.h"

#include <algorithm>

#include "sim/scenario/checks.h"
#include "sim/scenario/moe.h"

namespace lacuna::search {

std::string_view fate_key(Fate f) {
  switch (f) {
    case Fate::kSimulated: return "simulated";
    case Fate::kScreened: return "screened";
    case Fate::kOverMemoryEstimate: return "over-memory-estimate";
    case Fate::kOverGpuBudget: return "over-gpu-budget";
    case Fate::kTpHeads: return "tp-heads";
    case Fate::kCpSequence: return "cp-sequence";
    case Fate::kSpSequence: return "sp-sequence";
    case Fate::kBatch: return "batch";
    case Fate::kInterleavedMicrobatches: return "interleaved-microbatches";
    case Fate::kInterleavedBlockingP2p: return "interleaved-blocking-p2p";
    case Fate::kTpOverlapTokens: return "tp-overlap-tokens";
    case Fate::kProgramSize: return "program-size";
    case Fate::kPlacementRule: return "placement-rule";
    case Fate::kOverMemoryBound: return "over-memory-bound";
    case Fate::kCompileFailed: return "compile-failed";
    case Fate::kOverMemoryCompiled: return "over-memory-compiled";
    case Fate::kExpertParallel: return "expert-parallel";
    case Fate::kExpertTp: return "expert-tp";
  }
  return "?";
}

std::string_view fate_text(Fate f) {
  switch (f) {
    case Fate::kSimulated: return "simulated (folded, flow network)";
    case Fate::kScreened: return "valid, ranked by the screen only";
    case Fate::kOverMemoryEstimate: return "valid, but the screen's memory estimate is over the limit";
    case Fate::kOverGpuBudget: return "valid, but with its encoder GPUs it needs more than the GPU budget";
    case Fate::kTpHeads: return "tp does not divide the attention heads, kv heads or FFN size";
    case Fate::kCpSequence: return "2·cp does not divide the sequence";
    case Fate::kSpSequence: return "sequence parallelism: tp does not divide the tokens per CP rank";
    case Fate::kBatch: return "global batch is not a multiple of micro-batch × dp";
    case Fate::kInterleavedMicrobatches: return "interleaved: microbatches not a multiple of pp";
    case Fate::kInterleavedBlockingP2p: return "interleaved with blocking p2p needs pp > 2 (Megatron-LM)";
    case Fate::kTpOverlapTokens: return "TP overlap: the microbatch's tokens do not split into the GEMM pieces";
    case Fate::kProgramSize: return "over the supported program size";
    case Fate::kPlacementRule: return "the placement cannot take the plan (Optimus: no context parallelism)";
    case Fate::kOverMemoryBound: return "over the memory limit (lower bound on the peak)";
    case Fate::kCompileFailed: return "chosen for simulation, rejected while compiling";
    case Fate::kOverMemoryCompiled: return "simulated, but the compiled peak is over the limit";
    case Fate::kExpertParallel: return "ep does not divide the experts, ep·expert_tp does not divide tp·cp·dp, or tp > 1 without sequence parallelism";
    case Fate::kExpertTp: return "expert_tp does not divide the expert FFN width";
  }
  return "?";
}

PlanShape plan_shape(const scenario::Scenario& base) {
  const auto& m = base.model().llm();
  PlanShape s;
  s.layers = m.num_layers();
  s.heads = m.num_attention_heads();
  s.kv_heads = m.num_kv_heads();
  s.ffn = m.ffn_hidden_size();
  s.seq = m.seq_length();
  s.hidden = m.hidden_size();
  s.global_batch = base.training().global_batch();
  s.gpus_per_node = base.cluster().gpus_per_node();
  if (scenario::has_moe(base)) {
    const scenario::Moe moe = scenario::resolve_moe(base);
    s.experts = moe.num_experts();
    s.expert_ffn = moe.expert_ffn_hidden_size();
    s.shared_ffn = moe.shared_expert_ffn_hidden_size();
  }
  return s;
}

bool is_pruned(Fate f) {
  return f != Fate::kSimulated && f != Fate::kScreened && f != Fate::kOverMemoryEstimate && f != Fate::kOverGpuBudget &&
         f != Fate::kCompileFailed && f != Fate::kOverMemoryCompiled;
}

Fate check_plan(const PlanShape& s, const Plan& p) {
  // validate_consistency.cpp, check_tensor_and_context.
  if (s.heads % p.tp != 0 || s.kv_heads % p.tp != 0 || s.ffn % p.tp != 0) return Fate::kTpHeads;
  // moe.cpp validate_moe: shared experts split over TP like the dense MLP.
  if (s.experts > 0 && s.shared_ffn % p.tp != 0) return Fate::kTpHeads;
  if (p.cp > 1 && s.seq % (2 * p.cp) != 0) return Fate::kCpSequence;
  if (p.sequence_parallel && (s.seq / p.cp) % p.tp != 0) return Fate::kSpSequence;
  // check_world_and_batch (tp·cp·pp·dp equals the GPUs by construction).
  const int64_t per_step = int64_t{p.micro_batch} * p.dp;
  if (s.global_batch % per_step != 0) return Fate::kBatch;
  const int64_t microbatches = s.global_batch / per_step;
  // check_schedule.
  if (p.schedule == scenario::INTERLEAVED_1F1B && microbatches % p.pp != 0) return Fate::kInterleavedMicrobatches;
  // execution.cpp, validate_execution.
  if (p.schedule == scenario::INTERLEAVED_1F1B && !p.p2p_overlapped && p.pp <= 2) return Fate::kInterleavedBlockingP2p;
  if (p.tp_comm_overlap) {
    const int64_t tokens = int64_t{p.micro_batch} * s.seq / p.cp;
    if (tokens % p.tp != 0 || tokens % 4 != 0) return Fate::kTpOverlapTokens;
  }
  // check_size: the most layers on one pipeline rank and in all.
  int64_t most = s.layers / p.pp;
  if (p.split == LayerSplit::kLightLast) most = std::max<int64_t>(p.last_stage_layers, (s.layers - p.last_stage_layers) / (p.pp - 1));
  const double ops = static_cast<double>(microbatches) * static_cast<double>(most) * scenario::Limits::kOpsPerLayerMicrobatch;
  const double program_ops =
      static_cast<double>(microbatches) * static_cast<double>(s.layers) * scenario::Limits::kOpsPerLayerMicrobatch;
  if (ops > scenario::Limits::kOpsPerRank || program_ops > scenario::Limits::kOpsPerProgram) return Fate::kProgramSize;
  if (static_cast<__int128>(p.micro_batch) * s.seq * s.hidden > scenario::Limits::kActivationElements) {
    return Fate::kProgramSize;
  }
  // moe.cpp validate_moe: ep divides the experts; a stage's tp·cp·dp ranks
  // regroup as expert_tp × ep × expert_dp; expert_tp divides the expert FFN.
  if (s.experts > 0) {
    const int64_t ep = std::max<int32_t>(p.ep, 1);
    const int64_t etp = p.expert_tp > 0 ? p.expert_tp : p.tp;
    if (s.experts % ep != 0 || (int64_t{p.tp} * p.cp * p.dp) % (ep * etp) != 0) return Fate::kExpertParallel;
    // Megatron-Core refuses MoE with TP but without sequence parallelism.
    if (p.tp > 1 && !p.sequence_parallel) return Fate::kExpertParallel;
    if (s.expert_ffn % etp != 0) return Fate::kExpertTp;
  }
  // validate_mllm.cpp, check_optimus.
  if (p.placement == Placement::kOptimus && p.cp != 1) return Fate::kPlacementRule;
  return Fate::kScreened;
}

}  // namespace lacuna::search
