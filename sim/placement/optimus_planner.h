// Optimus, step 5: the Optimus model planner. Fixes the LLM plan,
// enumerates encoder plans (or takes the encoders' fixed layout), prunes them
// by memory, runs the bubble scheduler on every (plan, microbatch split) and
// keeps the lowest estimated iteration (docs/placements.md, "Optimus").
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "sim/compiler/module_recompute.h"
#include "sim/cost/cost_model.h"
#include "sim/placement/optimus_memory.h"
#include "sim/placement/optimus_plan.h"
#include "sim/placement/optimus_scheduler.h"
#include "sim/placement/optimus_timeline.h"
#include "sim/placement/optimus_work.h"
#include "sim/proto/program.pb.h"
#include "sim/scenario/scenario.h"

namespace lacuna::placement::optimus {

struct PlannerOptions {
  bool coarse_only = false;
  int64_t max_splits_per_plan = 4096;
  bool keep_candidates = false;  // record every (plan, split, estimate) tried
  // Try Optimus's dependency-point deferral (interleaved 1F1B only).
  bool defer = true;
  // Plan at this deferral only (tests; schedule::PipelineShape::warmup_deferral).
  std::optional<int32_t> fixed_deferral;
};

struct Candidate {
  Geometry geo;
  std::vector<int32_t> split;
  int64_t estimate_ns = 0;
};

struct PlannerResult {
  ir::Program llm;       // the LLM-only program the timeline came from (memory overheads applied)
  LlmTimeline timeline;
  Geometry geo;          // the chosen encoder plan
  bool sequence_parallel = false;
  // The recompute the LLM and the encoders run with: as asked, or raised to
  // fit HBM (docs/placements.md, "4. Memory").
  compiler::ModuleRecompute llm_recompute, encoder_recompute;
  EncoderWork work;
  Schedule schedule;     // the chosen split, with fine moves unless coarse_only
  Schedule coarse;       // the same plan and split, coarse step only
  bool fixed_plan = false;
  int32_t plans_evaluated = 0;         // scheduled
  int32_t plans_pruned_by_memory = 0;  // over capacity at every encoder recompute (all: the least-memory one is kept)
  int32_t plans_not_applicable = 0;    // sizes not divisible by the encoder TP
  int64_t splits_evaluated = 0;
  Bytes peak_memory;                   // of the chosen plan and split (plan_peak_memory_bytes)
  bool fits = true;                    // false: nothing fits, the least-memory plan was kept
  std::vector<Candidate> candidates;   // with keep_candidates
  // Dependency-point deferral: the chosen one (schedule::PipelineShape::
  // warmup_deferral; 0 = Megatron-LM's warm-up), how many were simulated, and
  // the LLM-only iteration at Megatron-LM's warm-up counts.
  int32_t warmup_deferral = 0;
  int32_t deferrals_evaluated = 0;
  // The search's estimate of the chosen (plan, split), whole microbatches
  // moved; schedule.estimate_ns adds the kernel-level cuts (≤ this).
  int64_t search_estimate_ns = 0;
  int64_t llm_megatron_iteration_ns = 0;
};

// Plans and schedules. Throws lacuna::Error (located in the scenario) when
// the LLM has cp > 1 or a fixed encoder layout does not fit Optimus. The
// encoders' layouts are the fixed plan only when the scenario's own
// placement is OPTIMUS (another placement's layouts are not Optimus plans).
PlannerResult plan_optimus(const scenario::LoadedScenario& scenario, const cost::CostModel& cost,
                           const PlannerOptions& options);

// The programs of a planned result, with ProgramInfo's modules and
// OptimusInfo filled.
ir::Program emit_optimus(const scenario::LoadedScenario& scenario, const PlannerResult& result);

}  // namespace lacuna::placement::optimus
