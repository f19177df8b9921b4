// Optimus: the encoder work of one plan, per encoder stage, as the ordered
// ops one GPU runs for one microbatch (a "pass"), each with its duration from
// the cost model. The bubble scheduler reads the durations; emission turns the
// same ops into IR, so both see exactly one description of the work.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/cost/cost_model.h"
#include "sim/placement/optimus_plan.h"
#include "sim/proto/program.pb.h"
#include "sim/scenario/scenario.h"

namespace lacuna::placement::optimus {

// One op of a pass. A TP collective is issued from the compute stream (a
// record) onto the encoder's TP stream; the compute stream waits for it
// (kWait) right before the kernel that consumes its result, as the compiler
// does for the LLM (docs/compiler.md): the collective takes time between two
// encoder kernels on its own stream and overlaps whatever the GPU computes
// meanwhile.
struct PassOp {
  enum Kind : uint8_t { kKernel, kCollective, kWait };
  Kind kind = kKernel;
  int32_t waits_for = -1;    // kWait: index of the kCollective op in the same pass
  int64_t duration_ns = 0;   // kKernel, kCollective
  ir::Op op;                 // kKernel: compute; kCollective: collective (group slot set at emission)
};

struct Pass {
  std::vector<PassOp> ops;
  int64_t contiguous_ns = 0;  // run back to back from an idle GPU
  int64_t compute_ns = 0;     // Σ kernel durations
  int64_t max_kernel_ns = 0;
  int32_t collectives = 0;
  bool empty() const { return ops.empty(); }
  // Sets compute_ns, max_kernel_ns, collectives and contiguous_ns from `ops`.
  void recompute_totals();
  // Ops [at, end) as a pass of their own (waits re-indexed); `at` must be a
  // point with no collective issued before it and waited for after it.
  Pass suffix(int32_t at) const;
  // Ops [0, at) as a pass of their own (the same condition on `at`).
  Pass prefix(int32_t at) const;
  // Kernel time inside [window_begin, window_end) when the pass (its first
  // `ops` ops; −1: all) runs back to back from `start`.
  int64_t compute_within(int64_t start, int64_t window_begin, int64_t window_end, int32_t ops = -1) const;
};

// One data-parallel bucket of an encoder stage's trained parameters
// (Megatron-LM DDP, as the compiler builds the LLM's: filled in
// gradient-ready order until it holds ddp_bucket_size parameters; one bucket
// per stage without overlap_grad_reduce).
struct DpBucket {
  int64_t parameters = 0;
  int32_t forward_op = 0;   // forward pass: first op of its layers (its gather must be done before)
  int32_t backward_op = 0;  // backward pass: its gradients are complete after this op
  int64_t gather_bytes = 0, reduce_bytes = 0;
  int64_t gather_ns = 0, reduce_ns = 0;
};

struct StageWork {
  Pass forward, backward;     // one microbatch on one GPU of this encoder stage
  int64_t trainable_parameters = 0;  // on one GPU
  int64_t frozen_parameters = 0;
  // Encoder data parallelism over DP_enc GPUs (empty when DP_enc = 1 or
  // nothing trains here): parameter all-gathers at iteration start, one per
  // bucket in forward order, back to back (distributed optimizer only); the
  // GPU's first forward waits for each bucket right before its layers with
  // overlap_param_gather, else for all of them before the pass. Gradient
  // reduce-scatters (all-reduce without the distributed optimizer) per
  // bucket in gradient-ready order: with overlap_grad_reduce each starts once
  // the GPU's last backward completed the bucket, else all after that pass.
  // Then the optimizer step.
  std::vector<DpBucket> buckets;  // gradient-ready order
  // Per forward op: when the gathers it waits for end on the GPU's first
  // microbatch (absolute ns from iteration start; 0: none), and the value of
  // the gather event it waits for (0: none).
  std::vector<int64_t> first_forward_gate_ns;
  std::vector<int32_t> first_forward_gate_value;
  ir::Compute optimizer;      // unset op_class when nothing trains
  int64_t optimizer_ns = 0;
  // Memory and recompute of one microbatch on one GPU of this stage
  // (docs/placements.md, "Memory"): what the forward pass keeps until the
  // backward (its memory deltas' sum), the most the backward re-materialises
  // at once (full recompute: one layer's activations), and the time of the
  // backward's RECOMPUTE kernels.
  Bytes activation;
  Bytes recompute_transient;
  int64_t recompute_ns = 0;
  bool trains() const { return trainable_parameters > 0; }
  bool data_parallel() const { return !buckets.empty(); }
  int32_t gathers() const;    // all-gathers issued (0 without the distributed optimizer)
};

struct EncoderWork {
  Geometry geo;
  int32_t microbatches = 0;   // LLM microbatches per LLM pipeline (N)
  int64_t micro_batch = 1;    // samples per microbatch
  bool sequence_parallel = false;
  scenario::Recompute recompute = scenario::RECOMPUTE_NONE;
  int64_t recompute_num_layers = 0;  // full recompute: the first N layers of each stage; 0 all
  bool distributed_optimizer = false;
  bool overlap_param_gather = false, overlap_grad_reduce = false;
  std::vector<StageWork> stages;  // by encoder stage j
  // Encoder stage j → j + 1 activations (backward: gradients, only when some
  // encoder trains) per microbatch, per GPU (sequence-sharded under SP).
  int64_t p2p_forward_bytes = 0, p2p_backward_bytes = 0;
  // Vision embeddings of one microbatch as one LLM stage-0 rank receives them
  // (sequence-sharded over the LLM's TP under its SP); the gradient is as large.
  int64_t boundary_bytes = 0;
  cost::GroupShape tp_group, dp_group;
  bool any_trainable_encoder = false;  // some encoder (not only a projector) trains
  // Encoder p2p between stages exists for the gradient (stage j has backward
  // work that needs the gradient from j + 1).
  bool backward_p2p() const { return any_trainable_encoder && geo.pp_enc > 1; }
};

// Why `geo` cannot run the scenario's encoders (sizes not divisible by
// TP_enc, …), or empty when it can. `sequence_parallel` as the plan uses it.
std::string plan_problem(const scenario::Scenario& spec, const Geometry& geo, bool sequence_parallel);

// The work of every encoder stage of `geo`. `llm` (the LLM-only program)
// gives the rank → node map for the group shapes.
EncoderWork build_encoder_work(const scenario::Scenario& spec, const Geometry& geo, bool sequence_parallel,
                               scenario::Recompute recompute, const ir::Program& llm, const cost::CostModel& cost,
                               int64_t recompute_num_layers = 0);

// Global rank of LLM coordinates (cp = 0), read from the LLM program's
// bindings (whatever its rank order).
class LlmRanks {
 public:
  explicit LlmRanks(const ir::Program& llm);
  int32_t rank(int32_t tp, int32_t dp, int32_t pp) const;
  int32_t node(int32_t rank) const { return program_.ranks(rank).node(); }

 private:
  const ir::Program& program_;
  int32_t tp_ = 1, dp_ = 1, pp_ = 1;
  std::vector<int32_t> rank_;  // index (pp · dp + dp) · tp + tp
};


}  // namespace lacuna::placement::optimus
