// The layer chain of a multimodal model for Megatron's balanced placement:
// encoder 0 (patch embedding + layers + final norm + projector), encoder 1, …,
// then the LLM (embedding + layers + head), cut into pp × v contiguous
// virtual stages by dynamic programming on per-layer time
// (docs/placements.md, "Megatron balanced").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/compiler/stage_program.h"
#include "sim/cost/cost_model.h"

namespace lacuna::compiler {

// One link of the chain: a layer of a module, with the module's pre glued to
// its first layer and its post to its last (so every virtual stage holds at
// least one transformer layer, and the embedding / head sit with the layers
// next to them as in Megatron's LLM pipelines).
struct ChainLayer {
  int32_t module = 0;  // Op.module: 0 the LLM, e + 1 encoder e
  int64_t layer = 0;   // the module's own layer index
  int64_t time_ns = 0; // forward + backward of one microbatch
};

// The groups a layer's TP and CP collectives run on.
struct ChainGroups {
  cost::GroupShape tp, cp;
  // MoE dispatch groups (docs/moe.md#groups); unset: the tp group's shape.
  std::optional<cost::GroupShape> ep, expert_tp, ep_intra_domain, ep_inter_domain;
  const cost::GroupShape& of(model::CommGroup g) const {
    switch (g) {
      case model::CommGroup::kCp: return cp;
      case model::CommGroup::kEp: return ep ? *ep : tp;
      case model::CommGroup::kExpertTp: return expert_tp ? *expert_tp : tp;
      case model::CommGroup::kEpIntraDomain: return ep_intra_domain ? *ep_intra_domain : tp;
      case model::CommGroup::kEpInterDomain: return ep_inter_domain ? *ep_inter_domain : tp;
      default: return tp;
    }
  }
};

// Time of a step list: kernels through cost.compute, TP / CP collectives
// through cost.collective on `groups`, one after another (the compute stream
// waits for every forward TP collective; a conservative sum elsewhere).
int64_t steps_time_ns(const std::vector<model::Step>& steps, const cost::CostModel& cost, const ChainGroups& groups);

// The chain of `in` (encoders in order, then the LLM, whose layer count is
// `llm_layers`), each link timed with `cost`: forward + backward (with the
// recompute mode's re-forward; frozen modules forward only), plus the glued
// pre / post work.
std::vector<ChainLayer> layer_chain(const StageInputs& in, int64_t llm_layers, const cost::CostModel& cost,
                                    const ChainGroups& groups);

// Splits `times` (one entry per link, in order) into `parts` contiguous,
// non-empty parts minimising the largest part's sum; returns each part's link
// count. Among optimal partitions: the one whose last cut is earliest, then
// recursively the same for the parts before it (deterministic). Exact
// (O(parts · n²) dynamic programming). Throws lacuna::Error when parts < 1
// or parts > times.size().
std::vector<int64_t> partition_chain(const std::vector<int64_t>& times, int32_t parts);

// Splits `links` chain links into `parts` contiguous parts by count, as
// Megatron-LM splits pipeline layers: links / parts each where that divides;
// otherwise the first links % parts parts get one link more (lacuna's rule,
// where Megatron would need an explicit layout). Throws lacuna::Error when
// parts < 1 or parts > links.
std::vector<int64_t> partition_by_count(int64_t links, int32_t parts);

// The largest part's sum of a partition (sizes as partition_chain returns).
int64_t max_part_time(const std::vector<int64_t>& times, const std::vector<int64_t>& sizes);

// Per virtual stage, the segments of a partition of `chain` (`sizes` links
// each): consecutive links of one module form one segment, with pre on the
// module's layer 0 and post on its last layer (`layers[module]` layers).
std::vector<std::vector<Segment>> chain_segments(const std::vector<ChainLayer>& chain,
                                                 const std::vector<int64_t>& sizes,
                                                 const std::vector<int64_t>& layers);

// "enc0:patch+L0-11", "enc0:L12-23+proj llm:emb+L0-3", "llm:L4-7+head": one
// virtual stage's segments, for class names and reports.
std::string describe_segments(const std::vector<Segment>& segments);

}  // namespace lacuna::compiler
