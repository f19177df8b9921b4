// Where every (tp, cp, dp, pp) coordinate lands: global rank, node, GPU, and
// the communication groups and pipeline peers each rank binds to.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "sim/proto/program.pb.h"

namespace lacuna::compiler {

// Slot indices of Program.group_slots / peer_slots, fixed for every program
// the compiler writes.
// kSlotEmbedding: the first and last pipeline stage of one (tp, cp, dp)
// (tied word-embedding gradients); kSlotGradNorm: the ranks whose gradient
// norms are summed (Megatron's grad_stats_parallel_group: the model-parallel
// tp × pp ranks, or every rank with the distributed optimizer).
enum GroupSlot : int32_t {
  kSlotTp = 0,
  kSlotCp = 1,
  kSlotDp = 2,
  kSlotDpCp = 3,
  kSlotEmbedding = 4,
  kSlotGradNorm = 5,
  kNumGroupSlots = 6,
  // MoE programs only (docs/moe.md#groups), after the dense slots.
  kSlotEp = 6,
  kSlotExpertTp = 7,
  kSlotExpertDp = 8,
  kSlotEpIntraDomain = 9,
  kSlotEpInterDomain = 10,
  kNumMoeGroupSlots = 11,
  // FP8 delayed-scaling programs only (docs/fp8.md#delayed-scaling-amax-reduction),
  // after the MoE slots (unbound in a dense program).
  kSlotAmax = 11,
  kNumAmaxGroupSlots = 12,
  // Bidirectional (DualPipe) programs only, after the amax slot (unbound
  // where the program has no amax groups).
  kSlotPpMirror = 12,
  kNumMirrorGroupSlots = 13
};
enum PeerSlot : int32_t { kSlotPpNext = 0, kSlotPpPrev = 1, kNumPeerSlots = 2 };

struct ParallelDims {
  int32_t tp = 1, cp = 1, dp = 1, pp = 1;
  int32_t world() const { return tp * cp * dp * pp; }
};

class RankLayout {
 public:
  // `order`: Megatron's order string, innermost first, e.g. "tp-cp-dp-pp"
  // (empty = that default). Throws lacuna::Error unless it names each of tp,
  // cp, dp and pp exactly once.
  RankLayout(ParallelDims dims, const std::string& order);

  const ParallelDims& dims() const { return dims_; }
  int32_t rank(const ir::Coordinates& c) const;
  ir::Coordinates coordinates(int32_t rank) const;

 private:
  ParallelDims dims_;
  std::array<int32_t, 4> axis_of_position_{};  // 0 tp, 1 cp, 2 dp, 3 pp; innermost first
};

// Fills program.group_slots, peer_slots, groups and ranks. Groups of one rank
// are not listed (the binding holds -1). Each distinct rank set is listed once:
// slots whose groups coincide bind to the same group (dp_cp to the DP group
// when cp = 1, to the CP group when dp = 1), whose kind is that of the first
// such slot in tp, cp, dp, dp_cp order. The class of a rank is its pipeline
// stage. Peers are cyclic along PP (the last stage's next is stage 0: the
// interleaved schedule wraps around); -1 when pp = 1.
// `world_grad_norm`: the distributed optimizer's gradient norm is reduced over
// every rank (one WORLD group) instead of the tp × pp model-parallel ranks.
void add_rank_layout(const RankLayout& layout, int32_t gpus_per_node, ir::Program& program,
                     bool world_grad_norm = false);

// Megatron-Core's expert grid (parallel_state.py, the expert RankGenerator
// with order tp-ep-dp-pp and cp folded away): within one pipeline stage the
// tp·cp·dp ranks, numbered by their index in the dense order with pp left
// out, are regrouped as expert_tp (innermost) × ep × expert_dp.
struct ExpertDims {
  int32_t ep = 1, expert_tp = 1;
  // GPUs per NVLink domain (cluster.nvlink_domain_gpus or gpus_per_node).
  int32_t domain_gpus = 8;
};
// Appends the MoE slots (kSlotEp … kSlotEpInterDomain) and their groups to a
// program add_rank_layout filled: EP, EXPERT_TP, EXPERT_DP, and for
// hierarchical dispatch the EP ranks of one NVLink domain and those with the
// same position in every domain.
void add_expert_layout(const RankLayout& layout, const ExpertDims& e, ir::Program& program);

// Appends the amax slot (kSlotAmax) and its groups to a program
// add_rank_layout (and, for MoE, add_expert_layout) filled: FP8 delayed
// scaling reduces amaxes over the tp × cp × dp ranks of each pipeline stage
// (Megatron-Core get_amax_reduction_group(with_context_parallel=True)). A
// dense program first gets the five MoE slots, bound to no group, so that
// every slot keeps its fixed index.
// `tp_only`: the tp × cp ranks of each (stage, dp) instead
// (TransformerConfig.tp_only_amax_red).
void add_amax_layout(const RankLayout& layout, ir::Program& program, bool tp_only = false);

// Appends the mirror slot (kSlotPpMirror) and its groups: DualPipe's
// bidirectional layout holds every stage twice, on pipeline ranks r and
// pp − 1 − r, which sum their copies' gradients; one two-rank group per pair
// (same tp, cp, dp). The MoE and amax slots come first, unbound where the
// program has none, so that every slot keeps its fixed index.
void add_mirror_layout(const RankLayout& layout, ir::Program& program);

}  // namespace lacuna::compiler
