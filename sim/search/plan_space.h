// The space `lacuna search` enumerates (docs/search.md#the-space): every
// dimension's values, narrowed by the command line's constraints, and the
// plans they make. Combinations that are the same plan are made once (no
// sequence parallelism without TP, no DP switches without data parallelism,
// no p2p mode without a pipeline, virtual stages only with the interleaved
// schedule); dp is derived from the GPU count. Whether a plan is valid is a
// separate question (plan_check.h), so that pruned plans keep their reason.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/scenario/scenario.h"
#include "sim/search/plan.h"

namespace lacuna::search {

struct GpuRange {
  int64_t lo = 0;
  int64_t hi = 0;
};
// "2048..8192" or "4096"; throws lacuna::Error naming --gpus.
GpuRange parse_gpu_range(const std::string& text);

struct Dimensions {
  std::vector<int64_t> num_nodes;
  std::vector<int64_t> tp, cp, pp, virtual_stages, micro_batch;
  std::optional<int64_t> dp;  // fixed by --fix parallel.dp
  std::vector<bool> sequence_parallel, distributed_optimizer, dp_overlap, tp_comm_overlap, p2p_overlapped;
  std::vector<scenario::Recompute> recompute;
  std::vector<scenario::ScheduleKind> schedule;
  std::vector<LayerSplit> split;
  std::vector<Placement> placement;
  // MoE (docs/search.md#moe): ep the divisors of num_experts, expert_tp
  // powers of two up to the node; {0} for a dense scenario (no dimension).
  std::vector<int64_t> ep = {0}, expert_tp = {0};
  // MEGATRON_ENCODER_PP: the encoder layout's (tp, pp) when the scenario
  // gives one; else the LLM's tp and pp 1 (placement/megatron_encoder_pp.h).
  // Its ranks come on top of the LLM's, so its plans have
  // dp = GPUs / (cp · (tp·pp + encoder tp·pp)).
  std::optional<std::pair<int64_t, int64_t>> encoder_pp_layout;
};

// The fields --fix accepts, in the order docs/search.md lists them.
std::vector<std::string> fixable_fields();

// The default space of `base` (docs/search.md#the-space) under the GPU range
// (nullopt: the scenario's own node count) and the --fix constraints
// ("parallel.tp=8", "parallel.recompute=RECOMPUTE_FULL,RECOMPUTE_SELECTIVE").
// `placements`: the scenario's (scenario_placements), which --fix
// placement.kind narrows.
// Throws lacuna::Error naming the flag for an unknown or non-searchable
// field, a value of the wrong kind, the same field fixed twice, or a GPU
// range without a whole number of nodes.
Dimensions make_dimensions(const scenario::Scenario& base, const std::optional<GpuRange>& gpus,
                           const std::vector<std::string>& fixes, const std::vector<Placement>& placements);

// Every plan of the space, in a fixed order (nodes, tp, sp, TP overlap, cp,
// pp, layer split, v, schedule, micro-batch, recompute, distributed
// optimizer, DP overlap, p2p, placement, ep, expert_tp): a plan's index is
// its id. MoE plans whose ep · expert_tp does not divide tp · cp · dp are not
// made (as plans whose tp · cp · pp does not divide the GPUs). Throws
// lacuna::Error when the space is empty, naming the constraints; a space of
// more than `limit` plans is refused, naming --fix and --gpus.
std::vector<Plan> enumerate_plans(const scenario::Scenario& base, const Dimensions& dims,
                                  const std::vector<std::string>& constraints, size_t limit = 20'000'000);

// The placements of a multimodal scenario (compare's, heterogeneous in both
// modes); {kNone} for an LLM-only one.
std::vector<Placement> scenario_placements(const scenario::LoadedScenario& loaded);

}  // namespace lacuna::search
