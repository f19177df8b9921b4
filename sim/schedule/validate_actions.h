// The invariants of an action schedule (action.h), checked before it is
// lowered, each refusal naming the rank, the step and the action, with the
// rank × step grid around it:
//  - every action names a stage of the pipeline and a microbatch of the
//    iteration, on the rank that holds the stage (Megatron-LM's layout);
//  - every (stage, microbatch) runs one forward and either one full backward
//    or one backward-input and one backward-weight, nothing twice;
//  - the passes can run in the listed order: a forward after the previous
//    stage's forward of its microbatch, a backward (or backward-input) after
//    its own forward and the next stage's backward, a backward-weight after
//    its backward-input. Ranks are run as far as their dependencies allow;
//    when none can move, the schedule deadlocks, and the error names every
//    stuck rank's next action and what it waits for.
#pragma once

#include <string>

#include "sim/schedule/action.h"

namespace lacuna::schedule {

// Throws lacuna::Error (file `file`, field "schedule") for the first broken
// invariant. Only the LLM's compute actions are checked; communication and
// collectives are the lowering's.
void validate_actions(const ActionSchedule& s, const PipelineShape& shape, const std::string& file);

}  // namespace lacuna::schedule
