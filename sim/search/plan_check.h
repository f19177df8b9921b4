// Whether a plan is one Megatron-LM (and lacuna's compiler) accepts, decided
// from the plan and the scenario's shape alone, fast enough for millions of
// plans. Each rule is the one sim/scenario/validate_consistency.cpp and
// execution.cpp apply, with its reason; plan_check_test.cpp checks on random
// plans that a plan pruned here is one validate_scenario rejects, and that a
// plan passed here is one it accepts (docs/search.md#pruning).
#pragma once

#include <cstdint>
#include <string_view>

#include "sim/scenario/scenario.h"
#include "sim/search/plan.h"

namespace lacuna::search {

// Why a plan left the search, or what became of it. The order is the CSV's
// and the summary's.
enum class Fate : int8_t {
  kSimulated = 0,           // compiled and simulated (folded, flow network)
  kScreened,                // valid, fits the memory bound; not among the best K by the screen
  kOverMemoryEstimate,      // valid, but the screen's memory estimate is over the limit: not simulated
  kOverGpuBudget,           // valid, but with its encoder island it needs more GPUs than the budget
  kTpHeads,                 // tp does not divide attention heads, kv heads or ffn_hidden_size
  kCpSequence,              // 2·cp does not divide seq_length
  kSpSequence,              // sequence parallelism: tp does not divide seq_length / cp
  kBatch,                   // global_batch is not a multiple of micro_batch × dp
  kInterleavedMicrobatches, // interleaved: microbatches not a multiple of pp
  kInterleavedBlockingP2p,  // interleaved with blocking p2p at pp ≤ 2 (Megatron-LM asserts)
  kTpOverlapTokens,         // TP overlap: the microbatch's tokens do not split into the GEMM pieces
  kProgramSize,             // over the supported program size (docs/reliability.md#bounded-runs)
  kPlacementRule,           // the placement cannot take the plan (Optimus has no context parallelism)
  kOverMemoryBound,         // over the memory limit by a lower bound on the peak
  kCompileFailed,           // chosen for simulation, but rejected while compiling (reason in the CSV)
  kOverMemoryCompiled,      // simulated, but the compiled program's peak is over the limit
  // MoE (sim/scenario/moe.cpp validate_moe); last, so that dense outputs keep
  // their order. Only MoE searches list them.
  kExpertParallel,          // ep does not divide num_experts, ep·expert_tp does not divide tp·cp·dp, or MoE with tp > 1 without SP
  kExpertTp,                // expert_tp does not divide the expert FFN width
};
inline constexpr int kNumFates = 18;
inline constexpr int kNumDenseFates = 16;
inline bool fate_shown(Fate f, bool moe) { return moe || static_cast<int>(f) < kNumDenseFates; }
std::string_view fate_key(Fate f);    // "simulated", "tp-heads", ... (CSV)
std::string_view fate_text(Fate f);   // one line for the summary

// The shape facts the rules need, read once from the (validated) base.
struct PlanShape {
  int64_t layers = 0, heads = 0, kv_heads = 0, ffn = 0, seq = 0, hidden = 0;
  int64_t global_batch = 0;
  int64_t gpus_per_node = 0;
  // MoE (0 experts: dense): resolved as sim/scenario/moe.h resolves them.
  int64_t experts = 0, expert_ffn = 0, shared_ffn = 0;
};
PlanShape plan_shape(const scenario::Scenario& base);

// kScreened when every rule holds, else the first rule broken (in Fate order).
Fate check_plan(const PlanShape& shape, const Plan& plan);

bool is_pruned(Fate f);  // a validity or memory-bound reason

}  // namespace lacuna::search
