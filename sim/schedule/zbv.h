// ZB-V: the V-shaped zero-bubble schedule of Qi et al., "Pipeline
// Parallelism with Controllable Memory" (NeurIPS 2024, arXiv 2405.15362), as
// its authors' scheduler builds it: sail-sg/zero-bubble-pipeline-parallelism,
// megatron/core/pipeline_parallel/zerobubble/scheduler/zbv.py
// (PipelineGraph.try_v_schedule and create_schedule, commit 39f2c186), read
// there and reimplemented here.
//
// A greedy list scheduler over pp ranks of two chunks in the V layout (rank r
// holds stages r and 2·pp − 1 − r): forwards fill the warm-up as memory
// allows, then each round places every rank's next backward (input gradient)
// and forward, filling the gaps it would idle with pending weight-gradient
// passes; it retries with the per-rank bubbles of its first attempt as a
// budget while that lowers the largest bubble, and keeps the best of four
// variants (filling gaps before forwards and backwards, or not). Costs are in
// any consistent unit; the result is an order, not a timing.
#pragma once

#include <cstdint>

#include "sim/schedule/action.h"

namespace lacuna::schedule {

struct ZbvCosts {
  // Pass times of one chunk of one microbatch, and the p2p latency. The
  // authors' fixed setting (zbv_greedy's, runtime.py): 1000, 1000, 1000, 1.
  int64_t forward = 1000, backward_input = 1000, backward_weight = 1000, comm = 1;
  // Activation memory a pass adds (F) or frees (B, W), in any unit; the
  // limit defaults to 2·pp forwards' worth (1F1B's peak), as in zbv.py.
  // The defaults are an abstract setting (B and W each free half of what F
  // holds) for tests; compiler::generate_schedule passes runtime.py's
  // estimate per layer: F 34·h + 5·a·s, W −32·h, B −(F + W) (h hidden size,
  // a attention heads, s sequence length).
  int64_t forward_memory = 2, backward_memory = -1, weight_memory = -1;
  int64_t max_memory = 0;  // 0: 2·pp·forward_memory
};

// The schedule of `pp` ranks and `microbatches` microbatches, in the V
// layout, with split backward (I, then W). Throws lacuna::Error for pp < 1
// or microbatches < 1, and for a memory limit too small to run it.
ActionSchedule zbv_schedule(int32_t pp, int32_t microbatches, const ZbvCosts& costs = {});

}  // namespace lacuna::schedule
