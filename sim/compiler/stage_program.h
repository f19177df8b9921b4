// The program of one pipeline rank (one RankClass): its schedule's passes as
// kernels, with TP / CP / PP / DP communication placed on their streams
// (docs/compiler.md).
#pragma once

#include <cstdint>
#include <vector>

#include "sim/compiler/stage_plan.h"
#include "sim/model/layer_shape.h"
#include "sim/proto/program.pb.h"
#include "sim/schedule/schedule.h"

namespace lacuna::compiler {

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
  int64_t layer_activation_bytes = 0;
  int64_t recompute_activation_bytes = 0;
};

struct StageProgram {
  ir::RankClass rank_class;
  int64_t parameters = 0;    // parameters this rank holds
};

// Ops the class will have; cheap, for refusing programs that are too large
// before building them.
int64_t estimate_ops(const StageInputs& in);

StageProgram build_stage_program(const StageInputs& in);

// Parameters of virtual stage `k`'s layers (+ embedding / head) on one rank.
int64_t stage_parameters(const StageInputs& in, int32_t virtual_stage);

// One DP bucket: layers [first_layer, first_layer + count) of a virtual
// stage and their parameters (the embedding / head count with the stage's
// first / last layer).
struct DpBucket {
  int64_t first_layer = 0;
  int64_t count = 0;
  int64_t parameters = 0;
};

// The bucket size in parameters the compiler uses (resolves the default;
// effectively unbounded without overlap_grad_reduce).
int64_t ddp_bucket_parameters(const StageInputs& in);

// Virtual stage `k`'s DP buckets in gradient-ready order (last layers first),
// filled like Megatron's DDP: each holds at least ddp_bucket_parameters()
// except the last one, which takes the rest.
std::vector<DpBucket> dp_buckets(const StageInputs& in, int32_t virtual_stage);

}  // namespace lacuna::compiler
