// Looped BFS: breadth-first pipeline parallelism (Lamy-Poirier, "Breadth-
// First Pipeline Parallelism", arXiv 2211.05953), as PyTorch pipelining's
// ScheduleLoopedBFS orders it (torch/distributed/pipelining/schedules.py,
// _calculate_single_rank_operations, pytorch/pytorch commit 1fd7abc2; read
// there, written anew) and torchtitan runs it.
//
// Megatron-LM's looped layout (chunk c of rank r holds stage c·pp + r). Each
// rank runs the forwards of all microbatches on its first chunk, then on its
// next, and so on; then the backwards, last chunk first, each chunk's
// microbatches last first. Where interleaved 1F1B goes depth first (the
// earliest microbatch), BFS goes breadth first (the earliest stage): fewer
// chunk switches and, with a sharded optimizer, one gather and one
// reduction per chunk per iteration, at the price of holding every
// microbatch's activations of every chunk at the turn. With m ≥ pp, free
// transfers and equal passes its bubble is (pp − 1)·(F + B), interleaved's
// over v (sim/schedule/looped_bfs_test.cpp checks it on the engine).
#pragma once

#include <cstdint>

#include "sim/schedule/action.h"

namespace lacuna::schedule {

// The schedule of `pp` ranks with `virtual_stages` chunks each and
// `microbatches` microbatches; throws lacuna::Error for a count below 1.
ActionSchedule looped_bfs_schedule(int32_t pp, int32_t virtual_stages, int32_t microbatches);

}  // namespace lacuna::schedule
