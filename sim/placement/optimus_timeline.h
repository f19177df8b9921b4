// Optimus, step 1: the LLM's own timeline, on which the bubble scheduler
// places encoder kernels (docs/placements.md, "Optimus").
//
// The LLM-only program is simulated once (fold: one pipeline). For one
// representative rank per pipeline stage the compute stream is read back:
// every kernel's start and end, and every EventWait that blocked. The compute
// stream idles only at blocked waits (records and waits take no time), so
// these are exactly its bubbles:
// - PRE: from 0 to the first kernel (DP parameter all-gather + PP warm-up);
// - POST: from the final DP wait (the first OPTIMIZER_STEP op) to the
//   optimizer kernel (PP cool-down + DP gradient reduce-scatter);
// - in between, one bubble per run of consecutive waits (no record or kernel
//   between them, so encoder work inserted before the run delays no
//   communication), classified by the stream whose record released the
//   longest wait of the run: PP (a pp receive), TP (TP / CP collective), DP.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/cost/cost_model.h"
#include "sim/proto/program.pb.h"

namespace lacuna::placement::optimus {

enum class BubbleKind : uint8_t { kPre, kPost, kPp, kTp, kDp, kOther };
const char* bubble_kind_name(BubbleKind kind);

struct Bubble {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  // Compute-stream op index of the run's first wait: encoder work goes right
  // before it (after the records that precede it).
  int32_t position = 0;
  BubbleKind kind = BubbleKind::kOther;
  int64_t length() const { return end_ns - start_ns; }
};

struct StageTimeline {
  int32_t rank = 0;            // the representative simulated for this stage
  int32_t compute_stream = 0;  // index of "compute" in the stage's class
  int32_t pre_position = 0;    // PRE encoder work goes before this op (after the gradient memsets, or before the wait for the previous step's gathers)
  int64_t pre_start_ns = 0;    // … and can start once the ops before it ended (or, placed before the wait, after the memsets' total time)
  int64_t pre_end_ns = 0;      // the LLM's first kernel starts
  int32_t post_position = 0;   // first OPTIMIZER_STEP op: the final DP wait, or the optimizer
  int64_t post_start_ns = 0;   // the compute stream reaches post_position
  int64_t post_end_ns = 0;     // the LLM optimizer step's first kernel starts
  int64_t optimizer_ns = 0;    // the step, to the compute stream's last op
  // Of PRE and POST: the compute stream's blocked waits released by the DP
  // stream (the exposed parameter all-gather, the exposed gradient reduction).
  // PRE and POST idle time: the compute stream's blocked waits before the
  // first kernel and from post_position to the optimizer kernel.
  int64_t pre_wait_ns = 0;
  int64_t post_wait_ns = 0;
  int64_t pre_dp_ns = 0;
  int64_t post_dp_ns = 0;
  // The stage's first backward kernel start and last forward kernel end:
  // steady-phase pipeline waits before the first are warm-up, after the
  // last cool-down (the bubble profile's split).
  int64_t first_backward_ns = 0;
  int64_t last_forward_end_ns = 0;
  // The step waits for a collective across stages (the gradient norm's or
  // the tied embedding's all-reduce, a sync-stream collective of phase
  // OPTIMIZER_STEP): no stage's step ends before every stage has reached it.
  bool step_sync = false;
  int64_t end_ns = 0;          // last op end of this rank, any stream
  std::vector<Bubble> bubbles;  // steady-phase bubbles (PP / TP / DP / other), in time order
  Bytes peak_activation;  // running sum of the compute ops' memory deltas, maximum
  int64_t kernels = 0;          // compute kernels of the stage (for reports)

  // PRE + POST + steady bubbles.
  int64_t bubble_ns() const;
};

struct LlmTimeline {
  int64_t iteration_ns = 0;
  int32_t microbatches = 0;
  std::vector<StageTimeline> stages;  // by pipeline stage
  // Dependency points on stage 0 (paper: F_i, B_i) per LLM microbatch i:
  // forward of i on chunk 0 begins (its first kernel) and the last
  // input-gradient kernel of its backward on chunk 0 ends (the gradient of the
  // vision embeddings exists).
  std::vector<int64_t> forward_start_ns;
  std::vector<int64_t> backward_end_ns;
  // Where the boundary wait goes (the first op of that forward pass) and
  // where the gradient record goes (the op after that kernel).
  std::vector<int32_t> forward_position;
  std::vector<int32_t> backward_position;
};

// The LLM's idle time per GPU by the Optimus paper's bubble categories, mean
// over pipeline stages (OptimusBubbleProfile in program.proto).
struct BubbleProfile {
  int64_t dp_all_gather_ns = 0, pp_warmup_ns = 0, pp_other_ns = 0, tp_ns = 0, pp_cooldown_ns = 0,
          dp_reduce_scatter_ns = 0;
  int64_t total_ns() const {
    return dp_all_gather_ns + pp_warmup_ns + pp_other_ns + tp_ns + pp_cooldown_ns + dp_reduce_scatter_ns;
  }
};
BubbleProfile bubble_profile(const LlmTimeline& llm);

// Simulates `llm` (an LLM-only program from compiler::compile) with fold and
// reads the timeline. Throws lacuna::Error when the program lacks what the
// scheduler needs (cp > 1, no optimizer step, a microbatch without a chunk-0
// pass on stage 0).
LlmTimeline llm_timeline(const ir::Program& llm, const cost::CostModel& cost);

}  // namespace lacuna::placement::optimus
