// One candidate of `lacuna search` (docs/search.md): an LLM parallel plan,
// its schedule, the execution switches Megatron-LM exposes as flags, and for
// a multimodal scenario the encoder placement. A plan is a small value; the
// scenario it stands for is made on demand (apply_plan), so a search can hold
// millions of them.
#pragma once

#include <cstdint>
#include <string>

#include "sim/proto/scenario.pb.h"

namespace lacuna::search {

// Encoder placements a multimodal candidate can take: compare's list
// (placement::applicable_placements), with the heterogeneous placement in its
// two modes.
enum class Placement : int8_t {
  kNone = 0,  // LLM-only scenario
  kMegatronBaseline,
  kMegatronBalanced,
  kOptimus,
  kHeteroColocated,
  kHeteroNonColocated,
  kMegatronEncoderPp,
  kMegatronLayerSplit,
};
const char* placement_name(Placement p);  // "megatron-baseline", "optimus", "hetero-colocated", ...
scenario::PlacementKind placement_kind(Placement p);  // HETEROGENEOUS for both modes

// How the layers split over the pipeline stages.
enum class LayerSplit : int8_t {
  kEven = 0,       // num_layers / (pp · v) per virtual stage
  kLightLast = 1,  // Megatron-LM's --decoder-last-pipeline-num-layers: the last stage lighter (it also runs the head)
};

struct Plan {
  int64_t num_nodes = 0;
  int64_t dp = 1;
  int32_t tp = 1;
  int32_t cp = 1;
  int32_t pp = 1;
  int32_t virtual_stages = 1;
  int32_t micro_batch = 1;
  int32_t last_stage_layers = 0;  // with kLightLast: the last stage's layers
  LayerSplit split = LayerSplit::kEven;
  bool sequence_parallel = false;
  bool distributed_optimizer = false;
  bool dp_overlap = false;        // --overlap-grad-reduce (+ --overlap-param-gather with the distributed optimizer)
  bool tp_comm_overlap = false;   // --tp-comm-overlap
  bool p2p_overlapped = false;    // --overlap-p2p-communication (pp > 1)
  scenario::Recompute recompute = scenario::RECOMPUTE_NONE;
  scenario::ScheduleKind schedule = scenario::ONE_F_ONE_B;
  Placement placement = Placement::kNone;
  // MoE scenarios (docs/search.md#moe): --expert-model-parallel-size and
  // --expert-tensor-parallel-size. 0 for a dense scenario: nothing is written
  // to the scenario and nothing shown.
  int32_t ep = 0;
  int32_t expert_tp = 0;

  int64_t gpus(int64_t gpus_per_node) const { return num_nodes * gpus_per_node; }
};

// The scenario the plan stands for: `base` with the plan's fields written
// over it (cluster.num_nodes, parallel.*, schedule.kind, training.micro_batch,
// execution.tp_comm_overlap and pipeline_p2p; parallel.ep and expert_tp for
// an MoE plan). Every other field (model,
// cluster, batch, other switches, the placement kind) is the base's: a
// multimodal plan's placement is applied when it is compiled.
scenario::Scenario apply_plan(const scenario::Scenario& base, const Plan& plan);

// "tp8 sp cp1 pp8 v12 dp48 mb2 rc-none do ovl tpo p2p-ovl interleaved" (MoE:
// "… dp48 ep8 etp1 mb2 …") and, multimodal, the placement: one token per dimension, for tables and logs.
std::string describe(const Plan& plan);

}  // namespace lacuna::search
