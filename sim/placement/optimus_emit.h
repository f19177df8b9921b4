// Optimus, step 4: the per-rank programs of a schedule. Starts from the
// LLM-only program and adds, per GPU class (LLM stage s, TP slice c): the
// encoder passes spliced into the LLM's compute stream where the scheduler
// put them, the encoder's TP / DP / inter-stage streams, and the boundary
// transfers between encoder pipelines and LLM stage 0 (docs/placements.md,
// "Optimus", for the streams, events, slots and tags).
#pragma once

#include "sim/placement/optimus_scheduler.h"
#include "sim/placement/optimus_timeline.h"
#include "sim/placement/optimus_work.h"
#include "sim/proto/program.pb.h"

namespace lacuna::placement::optimus {

// `llm` is the program the timeline came from; the result has one class per
// (LLM stage, TP slice), class id s · R + c. ProgramInfo is the LLM's
// (the caller adds the multimodal parts).
ir::Program emit_program(const ir::Program& llm, const LlmTimeline& timeline, const EncoderWork& work,
                         const Schedule& schedule);

}  // namespace lacuna::placement::optimus
