// DualPipe: DeepSeek-V3's bidirectional pipeline (DeepSeek-AI, "DeepSeek-V3
// Technical Report", arXiv 2412.19437, §3.2.1), as its authors' runtime
// orders it: deepseek-ai/DualPipe, dualpipe/dualpipe.py, DualPipe.step
// (commit 3da1bbea), read there and reimplemented here.
//
// pp ranks (even) run two pipelines in opposite directions over the
// bidirectional layout (schedule.h, StageLayout::kBidirectional): rank r
// holds stage r of the first and stage pp − 1 − r of the second (virtual
// stage 2·pp − 1 − r), each the whole model in pp stages, so every rank holds
// two stages' parameters. Microbatches 0 .. m/2 − 1 enter at rank 0, the
// rest at rank pp − 1. Each rank runs the eight steps of DualPipeV
// (dualpipev.h) on its two modules, numbered from the middle of the
// pipeline: rank r plays DualPipeV's rank min(r, pp − 1 − r) of pp/2, the
// ranks of the second half with their modules swapped. So DualPipe on pp
// ranks is DualPipeV on pp/2 ranks twice, mirrored (the "cut-in-half" that
// derives DualPipeV), which sim/schedule/dualpipe_test.cpp checks on the
// engine to the nanosecond. The authors' README gives its bubble as
// (pp/2 − 1)·(F&B + B − 3·W); as for DualPipeV, what the engine measures is
// within that figure (docs/schedules.md#dualpipe).
#pragma once

#include <cstdint>

#include "sim/schedule/action.h"

namespace lacuna::schedule {

// The schedule of `pp` ranks and `microbatches` microbatches. The authors'
// runtime needs an even pp, an even microbatch count and at least 2·pp
// microbatches; anything else is refused (lacuna::Error).
ActionSchedule dualpipe_schedule(int32_t pp, int32_t microbatches);

}  // namespace lacuna::schedule
