// Pipeline schedules as data: for each pipeline rank, the ordered list of the
// compute passes it runs. One representation feeds the compiler (which adds
// communication and kernels) and the synthetic-program builder used by the
// closed-form tests; the executor later runs the compiled result.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/proto/forward.h"

namespace lacuna::schedule {

enum class Pass : uint8_t {
  kForward,
  kBackward,        // input + weight gradient together (GPipe, 1F1B, interleaved)
  kBackwardInput,   // B (zero-bubble schedules)
  kBackwardWeight,  // W (zero-bubble schedules)
  // R: full recompute's re-forward of the stage's checkpointed layers as a
  // pass of its own, ahead of its backward (schedule files only: a
  // backward without one recomputes inside itself, layer by layer, as
  // Megatron-LM does; docs/schedules.md#recompute-actions).
  kRecompute,
};

struct Action {
  Pass pass;
  int32_t microbatch;  // 0 .. microbatches-1
  int32_t chunk;       // model chunk on this pipeline rank, 0 .. virtual_stages-1
  bool operator==(const Action&) const = default;
};

// Which virtual stages a pipeline rank holds.
enum class StageLayout : uint8_t {
  // Megatron-LM's: chunk c of rank r holds stage c·pp + r (every built-in
  // schedule; a forward always travels to the next rank, wrapping around).
  kLooped,
  // The V shape of ZB-V (Qi et al., "Pipeline Parallelism with Controllable
  // Memory", 2024) and DualPipe (DeepSeek-V3, 2024): two chunks, rank r
  // holding stages r and 2·pp − 1 − r, so rank 0 holds the first and the
  // last stage and the forward turns back at rank pp − 1 without a transfer.
  kV,
  // DeepSeek-V3's bidirectional DualPipe (DeepSeek-AI, "DeepSeek-V3
  // Technical Report", arXiv 2412.19437, §3.2.1; deepseek-ai/DualPipe,
  // dualpipe/dualpipe.py, commit 3da1bbea): two pipelines over the same pp
  // ranks in opposite directions, each the whole model in pp stages. Rank r
  // holds stage r of the first (virtual stage r) and stage pp − 1 − r of the
  // second (virtual stage pp + that stage, so 2·pp − 1 − r: the V layout's
  // numbering). The first half of the microbatches runs the first pipeline,
  // the second half the second (the authors' step() scatters the batch into
  // half_num_chunks at each end), and every stage's parameters exist twice,
  // on rank r and on its mirror pp − 1 − r, whose gradients are summed.
  kBidirectional,
};

struct PipelineShape {
  int32_t pp = 1;              // pipeline ranks
  int32_t virtual_stages = 1;  // model chunks per pipeline rank
  int32_t microbatches = 1;
  // Interleaved 1F1B only: Optimus's dependency-point deferral
  // (docs/placements.md, "Deferral"). Rank r runs clamp(d − 2r, 0,
  // 2·(pp − r − 1)) fewer warm-up forwards than Megatron-LM's count: the
  // upstream ranks first, the counts never growing downstream (a rank with
  // more warm-up forwards than its upstream neighbour would wait for inputs
  // that neighbour only sends after a backward) and never below (v − 1)·pp,
  // the count at which the forward of its first backward has run.
  // 0: Megatron-LM's schedule.
  int32_t warmup_deferral = 0;
  // Interleaved 1F1B only: consecutive microbatches per model chunk before
  // the next chunk (Megatron-Core's microbatch_group_size_per_vp_stage,
  // core_v0.10.0 on). 0: pp, Megatron-LM's default.
  int32_t microbatch_group = 0;
  int32_t group() const { return microbatch_group > 0 ? microbatch_group : pp; }
  // Schedules users bring (schedule.actions_file) may use the V layout;
  // every built-in schedule is looped.
  StageLayout layout = StageLayout::kLooped;
};

// The V and the bidirectional layout place stages alike: chunk 0 of rank r
// holds stage r, chunk 1 stage 2·pp − 1 − r.
inline bool v_shaped(const PipelineShape& s) {
  return s.layout == StageLayout::kV || s.layout == StageLayout::kBidirectional;
}

// Virtual stage of (pipeline rank, chunk): under Megatron-LM's layout chunk c
// of rank r holds virtual stage c·pp + r; under the V (and bidirectional)
// layout chunk 0 holds stage r and chunk 1 stage 2·pp − 1 − r.
inline int32_t virtual_stage(const PipelineShape& s, int32_t rank, int32_t chunk) {
  if (v_shaped(s)) return chunk == 0 ? rank : 2 * s.pp - 1 - rank;
  return chunk * s.pp + rank;
}

// The pipeline rank and the chunk that hold virtual stage `stage`.
inline int32_t rank_of_stage(const PipelineShape& s, int32_t stage) {
  if (v_shaped(s)) return stage < s.pp ? stage : 2 * s.pp - 1 - stage;
  return stage % s.pp;
}
inline int32_t chunk_of_stage(const PipelineShape& s, int32_t stage) {
  if (v_shaped(s)) return stage < s.pp ? 0 : 1;
  return stage / s.pp;
}

// Whether a microbatch's activation reaches `stage` from stage − 1, and its
// output goes on to stage + 1. Every layout chains its virtual stages in
// order, except the bidirectional one: its second pipeline starts at stage
// pp, and stage pp − 1 ends the first.
inline bool has_previous_stage(const PipelineShape& s, int32_t stage) {
  return stage > 0 && !(s.layout == StageLayout::kBidirectional && stage == s.pp);
}
inline bool has_next_stage(const PipelineShape& s, int32_t stage) {
  return stage < s.pp * s.virtual_stages - 1 && !(s.layout == StageLayout::kBidirectional && stage == s.pp - 1);
}

// The model stage a virtual stage holds (which layers, the embedding on the
// first, the head on the last): itself, or under the bidirectional layout
// its place in its own pipeline (stage mod pp). And how many there are.
inline int32_t model_stage(const PipelineShape& s, int32_t stage) {
  return s.layout == StageLayout::kBidirectional ? stage % s.pp : stage;
}
inline int32_t model_stages(const PipelineShape& s) {
  return s.layout == StageLayout::kBidirectional ? s.pp : s.pp * s.virtual_stages;
}

// Whether microbatch `mb` passes through `stage`: always, except under the
// bidirectional layout, whose first pipeline runs microbatches
// 0 .. microbatches/2 − 1 and whose second runs the rest.
inline bool stage_runs(const PipelineShape& s, int32_t stage, int32_t mb) {
  return s.layout != StageLayout::kBidirectional || ((stage < s.pp) == (mb < s.microbatches / 2));
}

// Warm-up forwards of pipeline rank `rank` under interleaved 1F1B: Megatron-LM's
// (pp − rank − 1)·2 + (v − 1)·N, N the microbatch group (pp by default;
// get_pp_rank_microbatches), less the deferral, capped at every forward of
// the rank.
int32_t interleaved_warmup(const PipelineShape& s, int32_t rank);

// Per pipeline rank, its ordered actions. Throws lacuna::Error when the shape
// does not suit the schedule (e.g. interleaved needs microbatches % pp == 0).
std::vector<std::vector<Action>> build_schedule(lacuna::scenario::ScheduleKind kind, const PipelineShape& shape);

std::string to_string(Pass p);

}  // namespace lacuna::schedule
