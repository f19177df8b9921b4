// DualPipeV: the V-shaped ("cut-in-half") form of DeepSeek-V3's bidirectional
// DualPipe (DeepSeek-AI, "DeepSeek-V3 Technical Report", arXiv 2412.19437,
// §3.2.1; the cut-in-half procedure is Sea AI Lab's), as its authors' runtime
// orders it: deepseek-ai/DualPipe, dualpipe/dualpipev.py, DualPipeV.step
// (commit 3da1bbea), read there and reimplemented here.
//
// pp ranks hold 2·pp stages in the V layout (rank r: stages r and
// 2·pp − 1 − r). Each rank runs eight steps: forwards of its first stage;
// forward pairs of both stages; backward-input, weight and forward of the
// second stage (zero bubble); the steady state of overlapped forward-backward
// pairs ("F&B": the forward of one stage with the backward of the other);
// the cool-down's backwards, the second half of them split into input and
// weight passes; and the deferred weight passes, first in, first out.
// Without overlap inside a pair its bubble per rank is
// (pp − 1)·(F&B + B − 3·W) with F&B = F + B (the authors' README, in pp/2 of
// their 2·pp stages), which sim/schedule/dualpipev_test.cpp checks on the
// engine.
#pragma once

#include <cstdint>

#include "sim/schedule/action.h"

namespace lacuna::schedule {

// The schedule of `pp` ranks and `microbatches` microbatches. The authors'
// runtime needs at least 2·pp microbatches; fewer is refused (lacuna::Error),
// as is pp < 1.
ActionSchedule dualpipev_schedule(int32_t pp, int32_t microbatches);

}  // namespace lacuna::schedule
