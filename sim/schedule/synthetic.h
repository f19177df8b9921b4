// Programs made straight from a schedule with fixed pass times: one compute op
// per pass, one rank per pipeline stage, p2p of fixed duration. Used to check
// the engine against closed forms (bubble fractions, Zero Bubble Table 5) and
// to answer "what if the stage times were these".
#pragma once

#include <vector>

#include "sim/core/units.h"
#include "sim/proto/program.pb.h"
#include "sim/schedule/schedule.h"

namespace lacuna::schedule {

struct StageTimes {
  TimeNs forward;          // one microbatch, one model chunk
  TimeNs backward_input;   // B
  TimeNs backward_weight;  // W (run right after B unless the schedule splits them)
};

struct SyntheticPipeline {
  lacuna::scenario::ScheduleKind kind = lacuna::scenario::ONE_F_ONE_B;
  PipelineShape shape;
  std::vector<StageTimes> per_stage;  // one entry per pipeline rank (or one for all)
  TimeNs p2p;                         // each activation / gradient transfer
  // Non-empty: this order (one list per rank, in shape.layout) instead of
  // build_schedule(kind, shape); generated schedules (ZB-V, DualPipeV) run
  // this way. The V layout's turn (stage pp − 1 to pp, on one rank) has no
  // transfer.
  std::vector<std::vector<Action>> order;
};

ir::Program build_synthetic_program(const SyntheticPipeline& pipeline);

}  // namespace lacuna::schedule
