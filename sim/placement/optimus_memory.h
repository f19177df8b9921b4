// Optimus, step 4: the memory of an encoder plan on every GPU and the
// cheapest encoder recompute at which it fits (docs/placements.md, "4. Memory";
// docs/memory-model.md, "Choosing the recompute").
#pragma once

#include <cstdint>
#include <vector>

#include "sim/compiler/module_recompute.h"
#include "sim/cost/cost_model.h"
#include "sim/placement/optimus_plan.h"
#include "sim/placement/optimus_timeline.h"
#include "sim/placement/optimus_work.h"
#include "sim/proto/program.pb.h"
#include "sim/scenario/scenario.h"

namespace lacuna::placement::optimus {

// NCCL communicators the encoder adds to each GPU: its TP group (TP_enc > 1),
// its DP group (DP_enc > 1 and something trains), and point-to-point when the
// LLM has none (encoder stages and the boundary then add sends).
int32_t encoder_communicators(const ir::Program& llm, const EncoderWork& work);

// The peak memory of the busiest GPU when encoder pipeline e runs split[e]
// LLM microbatches. For every GPU class (LLM stage s, TP slice):
//   baseline = the LLM class's MemoryBaseline (its CUDA context and NCCL
//              buffers included; `llm` has the memory overheads applied)
//            + the encoder stage shard's model state (model_state_bytes over
//              DP_enc; frozen weights bf16 only)
//            + nccl_communicator · encoder_communicators
//   A        = the LLM's peak activations on stage s (timeline)
//            + split[e] × the stage's activations per microbatch
//            + the most its backward re-materialises at once
//   peak     = baseline + A + ⌈fragmentation · A⌉.
// An upper bound of the emitted program's static peak: the encoder's passes
// on the GPU keep at most every microbatch's activations at once (the coarse
// schedule runs every forward before the LLM and every backward after it)
// and the two running sums peak at most at the sum of their peaks.
Bytes plan_peak_memory_bytes(const ir::Program& llm, const LlmTimeline& timeline, const EncoderWork& work,
                             const std::vector<int32_t>& split);

// ⌈n / m⌉ microbatches on each of the m pipelines (at least 1): no split of n
// puts fewer on its busiest pipeline.
std::vector<int32_t> even_split(int32_t n, int32_t m);

// A plan at the cheapest encoder recompute at which its even split fits:
// the encoders' ladder (one recompute for all of them: Optimus schedules
// the branches as one) from `asked` up, in order of the recompute kernels'
// time per microbatch summed over the encoder stages (NONE 0, SELECTIVE
// measured, full of the first N layers of each stage read from the
// every-layer work), each rung's work built until one fits. None fits: the
// top rung (fits = false).
struct EncoderFit {
  compiler::ModuleRecompute recompute;
  EncoderWork work;
  Bytes memory;  // plan_peak_memory_bytes at the even split
  bool fits = false;
};
EncoderFit fit_encoder_recompute(const scenario::Scenario& spec, const Geometry& geo, bool sequence_parallel,
                                 const compiler::ModuleRecompute& asked, const ir::Program& llm,
                                 const LlmTimeline& timeline, const cost::CostModel& cost);

}  // namespace lacuna::placement::optimus
