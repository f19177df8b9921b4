// Optimus, step 3: the Optimus bubble scheduler. A pure function
// of the LLM's timeline, one encoder plan's per-stage work and a microbatch
// split; it decides where every encoder pass runs and estimates the
// iteration time (docs/placements.md, "Optimus").
//
// Coarse: every encoder forward before the LLM's compute (PRE), every
// backward after it (POST). Encoder microbatch outputs are sorted by arrival
// at LLM stage 0 (EF_i: the i-th arrival feeds LLM microbatch i); when the PRE
// bubble is too short, or some EF_i > F_i, the whole LLM timeline is shifted
// by δ (found by fixed-point iteration: the assignment of outputs to LLM
// microbatches depends on δ). The estimate ends with the encoder's bucketed
// data-parallel reductions and its optimizer step after the LLM's.
// Fine, forward then backward: repeatedly take the encoder pipeline on the
// critical path and move one more of its microbatches out of PRE (its last)
// or POST (its first) into the LLM's steady-phase bubbles, kernel by kernel
// (whole kernels packed while their summed time fits a bubble, upstream
// encoder stage first for forward, downstream first for backward); keep the
// move only if every dependency still holds (EF_i ≤ F_i + δ, encoder backward
// only after its gradient arrived) and the estimate does not grow, else stop.
//
// Time frames: PRE passes run in absolute time from 0; everything placed in
// LLM bubbles or POST is in the LLM's own frame ("relative"), which the shift
// moves to absolute by + δ.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "sim/cost/cost_model.h"
#include "sim/placement/optimus_timeline.h"
#include "sim/placement/optimus_work.h"
#include "sim/proto/program.pb.h"

namespace lacuna::placement::optimus {

// Everything the scheduler reads, besides the timeline and the work.
struct SchedulerInput {
  const LlmTimeline* llm = nullptr;
  const EncoderWork* work = nullptr;
  // Per GPU class g = e · PP_enc + j of one LLM pipeline (j < PP_enc − 1):
  // encoder activation transfer j → j + 1 and gradient transfer j + 1 → j.
  std::vector<int64_t> pp_forward_ns, pp_backward_ns;
  // Per (pipeline e, LLM stage-0 slice k), index e · R + k: one boundary
  // transfer (activation or gradient), 0 where sender and receiver are one GPU.
  std::vector<int64_t> boundary_ns;
};

// Fills the transfer times from the ranks' nodes and cost.p2p.
SchedulerInput make_scheduler_input(const LlmTimeline& llm, const EncoderWork& work, const ir::Program& llm_program,
                                    const cost::CostModel& cost);

// Ops [begin, end) of a pass, inserted before compute-stream op `position`
// of the GPU's LLM class.
struct Segment {
  int32_t position = 0;
  int32_t begin = 0, end = 0;
};

struct PlacedPass {
  int32_t x = 0;            // microbatch index within the encoder pipeline
  int32_t llm_microbatch = 0;
  bool in_bubbles = false;  // moved by the fine step (else PRE / POST)
  // A cut at the kernel level; −1 when uncut. Forward: ops before it run in
  // PRE, the rest in the steady-phase bubbles (segments after the first).
  // Backward: ops before it run in the bubbles, the rest in POST (the last
  // segment); start_ns is then the start of the POST part.
  int32_t cut_op = -1;
  int64_t start_ns = 0, end_ns = 0;  // estimated, absolute
  std::vector<Segment> segments;
};

struct GpuPlacement {
  int32_t pipeline = 0, stage = 0, llm_stage = 0, slice = 0;
  std::vector<PlacedPass> forward, backward;  // by x; backward empty where the stage has no backward work
  int64_t compute_ns = 0;  // encoder kernel time of this GPU
  int64_t inside_ns = 0;   // of which inside the LLM-only bubbles
};

struct Schedule {
  std::vector<int32_t> split;  // microbatches per encoder pipeline
  bool coarse_only = false;
  int64_t delta_ns = 0;        // LLM shift
  int64_t estimate_ns = 0;     // estimated iteration
  // Encoder kernel time inside LLM bubbles / all encoder kernel time, on the
  // worst GPU (1 when no GPU has encoder work).
  double efficiency = 1;
  int32_t forward_moves = 0, backward_moves = 0;
  // Kernel-level forward moves: pipelines whose last PRE microbatch was cut
  // (schedule() only; evaluate() moves whole microbatches).
  int32_t forward_cuts = 0;
  // Kernel-level backward moves: pipelines whose first POST microbatch was
  // cut, its head run in the LLM's bubbles (schedule() only).
  int32_t backward_cuts = 0;
  // Per LLM microbatch i: the encoder pipeline and its microbatch x feeding it,
  // the estimated arrival of its vision embeddings at LLM stage 0 (EF_i,
  // absolute) and of its gradient at that pipeline's last stage.
  std::vector<int32_t> source_pipeline, source_x;
  std::vector<int64_t> forward_arrival_ns, gradient_arrival_ns;
  std::vector<GpuPlacement> gpus;  // index e · PP_enc + j
};

class BubbleScheduler {
 public:
  explicit BubbleScheduler(const SchedulerInput& in);
  ~BubbleScheduler();

  // The estimated iteration for a split (sum = microbatches, one entry per
  // encoder pipeline), coarse then fine unless `coarse_only`; whole
  // microbatches move (the planner's search).
  int64_t evaluate(const std::vector<int32_t>& split, bool coarse_only);
  // The same, with every placement, and after the whole-microbatch moves the
  // kernel-level forward cuts (so its estimate is at most evaluate()'s).
  Schedule schedule(const std::vector<int32_t>& split, bool coarse_only);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lacuna::placement::optimus
