// The data-parallel pass over actions (docs/schedules.md#the-dp-pass): where
// each stage's parameters are gathered (UNSHARD) and its gradients handed to
// the data-parallel reduction (REDUCE_GRAD), placed as PyTorch pipelining
// places them (torch/distributed/pipelining/schedules.py, _add_reduce_grad and
// _add_unshard_reshard; read there, written anew) with Megatron-LM's timing,
// and the reverse view the stage compiler reads, so that a schedule file can
// move them.
#pragma once

#include <string>
#include <vector>

#include "sim/schedule/action.h"

namespace lacuna::schedule {

// What the scenario's data parallelism does (the stage compiler's
// StageInputs: dp_cp, distributed_optimizer, overlap_grad_reduce).
struct DpSettings {
  bool reduce = false;          // dp × cp > 1: gradients are reduced over DP
  bool unshard = false;         // ... and sharded by the distributed optimizer: parameters are gathered
  bool overlap_reduce = false;  // overlap_grad_reduce: buckets go out during the stage's last backward
  bool overlap_gather = false;  // overlap_param_gather: each forward waits for its own gathers, asynchronous
};

// Whether any rank lists an UNSHARD, RESHARD or REDUCE_GRAD.
bool has_dp_actions(const ActionSchedule& s);

// `s` with its data-parallel actions (any it had are dropped first):
// - UNSHARD of each stage the rank holds, first on the rank's list, in chunk
//   order: Megatron-LM's distributed optimizer issues every chunk's
//   parameter gathers at iteration start, and each forward waits for its
//   own (settings.unshard only);
// - REDUCE_GRAD of a stage right after the pass that completes its
//   gradients, its last B or W (PyTorch's rule: the stage's gradient passes
//   counted to its microbatches), after the transfers that follow that pass;
//   without overlap_reduce, at the end of the rank's list, in that order
//   (Megatron-LM's finalize_model_grads reduces every chunk after the last
//   backward).
ActionSchedule add_dp_actions(const ActionSchedule& s, const PipelineShape& shape, const DpSettings& settings);

// Where rank `rank`'s data-parallel work goes, indices into its compute
// passes (to_schedule's order).
struct DpPoints {
  // Per chunk: the pass after which its gradients go to DP. At the chunk's
  // last B or W (with overlap_reduce) the stage compiler hands each bucket
  // over as that pass produces it; later, all at once after that pass.
  std::vector<int32_t> reduce_after;
  // Chunks in REDUCE_GRAD order (the order reductions go out when several
  // share a point) and in UNSHARD order (the order gathers are issued; empty
  // without settings.unshard).
  std::vector<int32_t> reduce_order;
  std::vector<int32_t> gather_order;
  // Per chunk: the pass after which its gathers are issued (an UNSHARD
  // placed after it, ahead of the stage's first forward); -1 at iteration
  // start. Empty without settings.unshard.
  std::vector<int32_t> gather_after;
};

// Reads the DP actions of `rank`. A file without any gets the pass's
// placement. An UNSHARD after a pass issues that stage's gathers there, a
// lookahead as PyTorch's FSDP places them or as Megatron-LM's
// align_param_gather does for the interleaved schedule's later chunks
// (docs/schedules.md#the-dp-pass). Throws lacuna::Error (file, rank, step,
// the action, the grid) for a REDUCE_GRAD before its stage's last B or W, one
// other than at the rank's end without overlap_reduce, an UNSHARD after its
// stage's first forward, or after the rank's first pass without
// overlap_gather (the gathers are then synchronous, before the first
// forward), a DP action the settings have no use for
// (no DP, or no sharding), RESHARD (Megatron-LM keeps gathered parameters for
// the iteration), a stage listed twice or missing, or a stage of another rank.
DpPoints dp_points_of(const ActionSchedule& s, int32_t rank, const PipelineShape& shape, const DpSettings& settings,
                      const std::string& file);

}  // namespace lacuna::schedule
