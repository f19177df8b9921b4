// A compiled rank class read back as actions (sim/schedule/action.h): the
// compute passes its compute stream runs, in order, with a kernel range on
// every piece of a pass that other kernels cut. It is the schedule a GPU
// runs as compiled, whatever built it (a placement's own scheduler, Optimus's
// bubble filling, DualPipe's overlapped pairs), so `lacuna compile
// --dump-schedule` can print any placement, and tests can hold a placement's
// own actions against the program it emitted (docs/schedules.md#reading-a-
// program-back).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/proto/program.pb.h"
#include "sim/schedule/action.h"

namespace lacuna::compiler {

// Where a pass of (module, chunk) sits: its virtual stage within its module's
// pipeline. Module 0 is the LLM; module i + 1 encoder i (ir::Op::module).
using StageOf = std::function<int32_t(int32_t module, int32_t chunk)>;

// The compute passes of `rank_class`'s compute stream (the stream named
// "compute"). A pass is every kernel (an op with a Compute) of one
// (module, chunk, microbatch) and kind: FORWARD kernels form the forward F,
// RECOMPUTE kernels the recompute R; the BACKWARD_INPUT and BACKWARD_WEIGHT
// kernels form a full backward B, or an input-gradient pass I and a
// weight-gradient pass W (zero-bubble schedules), as below.
// Kernels of other phases (the optimizer, DP-side compute) belong to no pass
// and are skipped; so are non-kernel ops (waits, records, collectives).
// A pass whose kernels are not consecutive among the stream's pass kernels
// is written as one action per consecutive piece, each with its kernel range
// within the pass ("0F3@0-12", then "vit:0F5@0-4", then "0F3@12-40"). A
// recompute and its microbatch's backward, which interleave group by group,
// do not cut each other: they read as "R&B" (a recompute wholly before its
// backward's first kernel as a lone R; docs/schedules.md#recompute-actions).
// Input- and weight-gradient kernels of one microbatch form separate I and W
// passes when all input-gradient kernels come first (a full backward
// interleaves them layer by layer); a backward without weight-gradient
// kernels (a frozen module's) is a B.
// `module_names[i]` prefixes module i's actions (the LLM's, index 0, is
// empty). Throws lacuna::Error naming the class for a class without a
// compute stream or an op of a module without a name.
schedule::RankActions class_actions(const ir::RankClass& rank_class, const StageOf& stage_of,
                                    const std::vector<std::string>& module_names);

}  // namespace lacuna::compiler
