// schedule.actions_file (kind CUSTOM): a schedule users bring, read, checked
// (sim/schedule/validate_actions.h) and converted to the builder's form that
// the stage compiler lowers, exactly as a built-in schedule is.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sim/compiler/pass_times.h"
#include "sim/cost/cost_model.h"
#include "sim/scenario/scenario.h"
#include "sim/schedule/action.h"
#include "sim/schedule/lower_dp.h"
#include "sim/schedule/p2p_calls.h"

namespace lacuna::compiler {

// The file named by schedule.actions_file, resolved against the scenario
// file's folder (as written when absolute).
std::string actions_file_path(const scenario::LoadedScenario& scenario);

// Reads, parses and validates the scenario's actions file for `shape`, and
// returns each pipeline rank's compute passes. Errors name the actions file
// (line, column and token for syntax; rank, step and action with the grid for
// invariants); a missing or unreadable file names the scenario's field.
struct CustomSchedule {
  std::vector<std::vector<schedule::Action>> passes;  // per pipeline rank
  // When the file writes out the pipeline's sends and receives: each rank's
  // blocking calls as written (schedule::p2p_calls_of); else absent, and the
  // p2p pass places them.
  std::optional<std::vector<std::vector<schedule::P2pCall>>> p2p_calls;
  // Per rank, the passes whose forward runs overlapped with the next pass
  // (schedule::overlapped_pairs: DualPipe's F&B).
  std::vector<std::vector<int32_t>> overlapped_pairs;
  // When the file places the data-parallel actions (UNSHARD, REDUCE_GRAD):
  // each rank's points (schedule::dp_points_of); else absent, and the stage
  // compiler places them as the DP pass does.
  std::optional<std::vector<schedule::DpPoints>> dp_points;
  // When the file places FP8's amax reductions (AMAX): per rank, per pass,
  // whether it runs one (schedule::amax_passes_of); else absent, and every
  // forward, backward and input-gradient pass does.
  std::optional<std::vector<std::vector<bool>>> amax_passes;
};

// What the scenario's data parallelism does, for the DP pass
// (schedule::DpSettings): reduce with dp × cp > 1, gather with the
// distributed optimizer too, overlap with overlap_grad_reduce.
schedule::DpSettings scenario_dp_settings(const scenario::LoadedScenario& scenario);
// `shape` gets the stage layout the file's actions follow (looped, or V).
CustomSchedule load_custom_schedule(const scenario::LoadedScenario& scenario, schedule::PipelineShape& shape);

// The LLM pipeline's shape of a scenario (pp, virtual stages, microbatches).
schedule::PipelineShape scenario_pipeline_shape(const scenario::LoadedScenario& scenario);

// The actions the scenario's LLM pipeline runs: the built-in schedule's or
// the actions file's (validated). Throws for scenarios with encoders, whose
// placements do not emit actions yet (docs/schedules.md#the-action-ir).
// `shape` (optional) gets the pipeline's shape, its stage layout included.
schedule::ActionSchedule scenario_actions(const scenario::LoadedScenario& scenario,
                                          schedule::PipelineShape* shape = nullptr);

// `path` read and checked against the scenario's pipeline as if it were its
// actions file; returns it parsed.
// `shape` (optional) gets the pipeline's shape with the file's stage layout.
// `option` names where the path came from in errors (the caller's flag or
// field).
schedule::ActionSchedule check_actions_file(const scenario::LoadedScenario& scenario, const std::string& path,
                                            const std::string& option, schedule::PipelineShape* shape = nullptr);

// The generators generate_schedule knows, in the order help lists them.
const std::vector<std::string>& schedule_generators();

// A schedule generated for the scenario's LLM pipeline, for actions_file,
// named by `spec` (a generator's name, then its argument after a colon):
// "zb-v" (schedule::zbv_schedule, its activation memory runtime.py's
// per-layer estimate from the model's hidden size, attention heads and
// sequence length; its pass costs the authors' fixed setting, or with `cost`
// lacuna's own: the scenario compiled as it stands and mean_pass_times of it,
// written to `times` when given), "dualpipev" (schedule::dualpipev_schedule),
// "dualpipe" (schedule::dualpipe_schedule, bidirectional), "looped-bfs"
// (schedule::looped_bfs_schedule) or "1f1b" (schedule::in_flight_1f1b_schedule:
// Megatron-LM's counts of microbatches in flight, "1f1b:K" each capped at K,
// "1f1b:k0,k1,..." one count per pipeline rank; one chunk per rank). Throws for
// another name (the error names `option`, the caller's flag or field), a
// scenario with encoders, virtual_stages other than 2 (1 for 1f1b), fewer than 2·pp
// microbatches, or (DualPipe) an odd pp or microbatch count.
schedule::ActionSchedule generate_schedule(const scenario::LoadedScenario& scenario, const std::string& spec,
                                           const std::string& option, const cost::CostModel* cost = nullptr,
                                           PassTimes* times = nullptr);

}  // namespace lacuna::compiler
