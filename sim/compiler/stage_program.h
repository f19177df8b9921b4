// The program of one pipeline rank (one RankClass): its schedule's passes as
// kernels, with TP / CP / PP / DP communication placed on their streams
// (docs/compiler.md).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "sim/compiler/stage_plan.h"
#include "sim/model/layer.h"
#include "sim/model/layer_shape.h"
#include "sim/proto/program.pb.h"
#include "sim/schedule/lower_dp.h"
#include "sim/schedule/p2p_calls.h"
#include "sim/schedule/schedule.h"

namespace lacuna::compiler {

// A module other than the LLM that shares the LLM's pipeline (the Megatron
// placements of a multimodal model): what one of its layers, and the work
// before its first and after its last layer, run on one rank, and what it
// holds. encoders[e] of StageInputs is module e + 1 (Op.module).
struct ModuleWork {
  model::LayerShape shape;  // one layer on this rank (TP / CP / SP applied)
  int64_t num_layers = 0;   // the module's layers (post follows the last)
  // Layers and `pre` run forward only and hold weights only (no gradients, no
  // optimizer state, not reduced); `post` still trains (the projector).
  bool frozen = false;
  std::vector<model::Step> layer_forward, layer_backward;  // backward with the recompute mode's re-forward
  // With RECOMPUTE_FULL and recompute_num_layers = N > 0 (Megatron's block
  // method): only the first N layers of the module in each virtual stage run
  // layer_backward; the others run layer_backward_plain and keep
  // layer_activation_bytes_plain.
  int64_t recompute_num_layers = 0;
  std::vector<model::Step> layer_backward_plain;
  Bytes layer_activation_bytes_plain;
  // Mixture of experts (the LLM only, docs/moe.md): layer l with
  // shape.moe.is_moe_layer(l) runs the moe_ lists, holds moe_layer_parameters
  // (moe_expert_parameters of them routed experts, reduced over expert DP)
  // and keeps the moe_ activation bytes.
  std::vector<model::Step> moe_layer_forward, moe_layer_backward, moe_layer_backward_plain;
  Bytes moe_layer_activation_bytes, moe_recompute_activation_bytes, moe_layer_activation_bytes_plain;
  int64_t moe_layer_parameters = 0, moe_expert_parameters = 0;
  bool is_moe(int64_t layer) const { return shape.moe.is_moe_layer(layer); }
  int64_t parameters_of(int64_t layer) const { return is_moe(layer) ? moe_layer_parameters : layer_parameters; }
  int64_t expert_parameters_of(int64_t layer) const { return is_moe(layer) ? moe_expert_parameters : 0; }
  std::vector<model::Step> pre_forward, pre_backward;      // before layer 0 (patch embedding)
  std::vector<model::Step> post_forward, post_backward;    // after the last layer (final norm + projector)
  // Parameters held on this rank; post_frozen_parameters of post's are not
  // trained (a frozen encoder's final norm).
  int64_t layer_parameters = 0, pre_parameters = 0, post_parameters = 0, post_frozen_parameters = 0;
  // Activation bytes kept per microbatch from forward to backward, as
  // StageInputs' LLM fields; post's from its forward to its backward.
  Bytes layer_activation_bytes, recompute_activation_bytes, post_activation_bytes;
  // The p2p message when a virtual stage ends after one of its layers (its
  // hidden state), and its output once `post` ran (the vision embeddings,
  // carried through later stages until the LLM merges them).
  int64_t layer_p2p_bytes = 0, output_p2p_bytes = 0;
};

// A contiguous run of one module's layers inside a virtual stage.
struct Segment {
  int32_t module = 0;  // 0 the LLM, e + 1 StageInputs::encoders[e]
  int64_t first = 0;   // the module's own layer index
  int64_t count = 0;
  bool pre = false;    // LLM: embedding; encoder: patch embedding (before `first`)
  bool post = false;   // LLM: final norm + logits + loss; encoder: final norm + projector
  bool operator==(const Segment&) const = default;
};

struct StageInputs {
  model::LayerShape shape;  // per-rank (TP / CP / SP applied)
  scenario::Recompute recompute = scenario::RECOMPUTE_NONE;
  int32_t pp_rank = 0;
  schedule::PipelineShape pipeline;
  std::vector<LayerRange> stages;         // every virtual stage, pipeline order
  std::vector<schedule::Action> actions;  // this rank's schedule
  int64_t dp_cp = 1;                      // gradient-reduction group size
  bool distributed_optimizer = false;
  bool overlap_grad_reduce = false;
  bool overlap_param_gather = false;
  // Megatron-LM's --ddp-bucket-size in parameters; ≤ 0: its default
  // max(40M, 1M × dp·cp). Buckets only with overlap_grad_reduce (Megatron
  // otherwise uses one bucket per model chunk).
  int64_t ddp_bucket_size = 0;
  // Bytes a layer keeps per microbatch under `recompute`, and, for full
  // recompute, what the recomputation re-materialises (the no-recompute
  // amount); 0 otherwise.
  Bytes layer_activation_bytes;
  Bytes recompute_activation_bytes;
  // Multimodal (Megatron placements): the encoders sharing the pipeline, and
  // per virtual stage (pipeline order) its segments in forward order. Empty
  // `segments`: LLM-only, one segment per stage from `stages` (embedding on
  // virtual stage 0, head on the last).
  std::vector<ModuleWork> encoders;
  std::vector<std::vector<Segment>> segments;
  // RECOMPUTE_FULL, block method: layers recomputed per model chunk (0: all).
  int64_t recompute_num_layers = 0;
  // Execution semantics (docs/compiler.md#execution), resolved.
  scenario::Execution execution;
  scenario::ScheduleKind schedule_kind = scenario::ONE_F_ONE_B;
  // Blocking p2p: this rank's calls as a schedule file writes them out
  // (schedule::p2p_calls_of); absent: schedule::blocking_p2p_calls of
  // schedule_kind.
  std::optional<std::vector<schedule::P2pCall>> p2p_calls;
  // Indices into `actions` of forwards that run overlapped with the next
  // pass, a backward of another stage (DualPipe's F&B; a schedule file's
  // '&'), ascending. The builder interleaves the pair's kernels
  // (StageBuilder::overlapped_pair).
  std::vector<int32_t> overlapped_pairs;
  // This rank's data-parallel points as a schedule file places them
  // (schedule::dp_points_of); absent: the DP pass's placement (each chunk
  // reduced from its last backward, gathers in chunk order).
  std::optional<schedule::DpPoints> dp_points;
  // Per pass of this rank, whether it runs FP8's amax reduction, as a
  // schedule file's AMAX actions place them (schedule::amax_passes_of);
  // absent: every forward, backward and input-gradient pass (the amax pass's
  // placement).
  std::optional<std::vector<bool>> amax_passes;
  scenario::Precision precision = scenario::BF16;
  // MoE: the expert data-parallel group size (docs/moe.md#groups).
  int64_t expert_dp = 1;
};

struct StageProgram {
  ir::RankClass rank_class;
  int64_t parameters = 0;         // parameters this rank holds
  int64_t expert_parameters = 0;  // of which routed experts (sharded over expert DP)
  int64_t frozen_parameters = 0;  // of which held as weights only (frozen encoders)
};

// The LLM as a ModuleWork (module 0: embedding as pre, head as post), so
// that every segment is emitted, and timed, by the same code.
ModuleWork llm_module_work(const StageInputs& in);

// Virtual stage `k`'s segments (derived from `stages` when in.segments is
// empty).
std::vector<Segment> stage_segments(const StageInputs& in, int32_t virtual_stage);

// Bytes of the activation virtual stage k sends to k + 1 (and of the gradient
// coming back): the LLM's hidden state (÷ tp with SP) while the stage ends in
// the LLM; inside an encoder its hidden state plus the finished encoders'
// outputs; after a projector the finished encoders' outputs.
int64_t boundary_p2p_bytes(const StageInputs& in, int32_t virtual_stage);

// Ops the class will have; cheap, for refusing programs that are too large
// before building them.
int64_t estimate_ops(const StageInputs& in);

StageProgram build_stage_program(const StageInputs& in);

// Parameters of virtual stage `k`'s layers (+ embedding / head, + encoder
// pre / post) on one rank; the trained ones exclude frozen encoder weights.
int64_t stage_parameters(const StageInputs& in, int32_t virtual_stage);
int64_t stage_trained_parameters(const StageInputs& in, int32_t virtual_stage);

// One DP bucket: layers [first_layer, first_layer + count) of one segment of a
// virtual stage and their trained parameters (a segment's pre / post count
// with its first / last layer). Buckets never span modules.
struct DpBucket {
  int64_t first_layer = 0;
  int64_t count = 0;
  int64_t parameters = 0;
  // Of `parameters`, routed-expert weights: reduced (gathered) over the
  // expert-DP group, apart from the rest (Megatron's DDP keeps expert
  // parameters in buffers of their own, distributed_data_parallel.py).
  int64_t expert_parameters = 0;
  int32_t segment = 0;  // index in stage_segments()
  int32_t module = 0;
};

// The bucket size in parameters the compiler uses (resolves the default;
// effectively unbounded without overlap_grad_reduce).
int64_t ddp_bucket_parameters(const StageInputs& in);

// Virtual stage `k`'s DP buckets in gradient-ready order (last segment's last
// layers first), filled like Megatron's DDP within each segment: each holds at
// least ddp_bucket_parameters() except a segment's last, which takes the
// rest. An encoder segment with nothing trained has no bucket.
std::vector<DpBucket> dp_buckets(const StageInputs& in, int32_t virtual_stage);

}  // namespace lacuna::compiler
