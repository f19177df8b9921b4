// The recompute pass over actions (docs/schedules.md#recompute-actions):
// where full activation recomputation runs. Megatron-LM recomputes inside
// the backward, each checkpointed group right before its own backward
// (megatron/core/tensor_parallel/random.py, CheckpointFunction.backward),
// written "R&B": the recompute interleaved with its backward. A lone R is
// the re-forward as a pass of its own, wherever the schedule puts it ahead
// of its backward, as Mario moves recomputation into pipeline bubbles
// (Liu et al., "Mario: Near Zero-cost Activation Checkpointing in Pipeline
// Parallelism", PPoPP 2025, doi 10.1145/3710848.3710878).
#pragma once

#include <string>

#include "sim/schedule/action.h"

namespace lacuna::schedule {

// Whether any rank lists an LLM R (paired or not).
bool has_recompute_actions(const ActionSchedule& s);

// `s` with an "R&B" in front of every LLM backward (B, or I under the
// zero-bubble split) whose stage and microbatch have no R on the rank:
// what the stage compiler runs for it anyway under full recompute. A
// backward that closes DualPipe's "F&B" pair keeps its recompute inside it
// unwritten (a token pairs two passes).
ActionSchedule add_recompute_actions(const ActionSchedule& s);

// Refuses (file, rank, step, the action, the grid) an R of the LLM when the
// scenario does not recompute whole layers: `recompute` is its
// parallel.recompute, by name ("RECOMPUTE_NONE", "RECOMPUTE_SELECTIVE";
// "RECOMPUTE_FULL" passes).
void check_recompute_actions(const ActionSchedule& s, const std::string& recompute, const std::string& file);

}  // namespace lacuna::schedule
