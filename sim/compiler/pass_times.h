// The time of one microbatch's pipeline passes as lacuna models them: from a
// compiled LLM program and a cost model, the kernel time of each stage's
// forward, input-gradient and weight-gradient work and of one stage-boundary
// transfer. What a schedule generator that weighs passes by their cost
// (ZB-V's greedy) takes instead of fixed costs.
#pragma once

#include "sim/core/units.h"
#include "sim/cost/cost_model.h"
#include "sim/proto/program.pb.h"

namespace lacuna::compiler {

struct PassTimes {
  TimeNs forward;          // F: FORWARD kernels
  TimeNs backward_input;   // I: BACKWARD_INPUT and RECOMPUTE kernels
  TimeNs backward_weight;  // W: BACKWARD_WEIGHT kernels
  TimeNs p2p;              // one stage-boundary activation, as cost.p2p times it (0 without pp)
  int32_t stages = 0;      // (pipeline rank, chunk) pairs averaged
};

// Means over the pipeline's virtual stages (ranks tp = cp = dp = 0) of one
// microbatch's kernels (microbatch 1, or 0 when the iteration has one: the
// first carries no extra kernels in lacuna's programs, but skipping it keeps
// any first-microbatch work out). Kernels with a fixed duration count it,
// the others cost.compute. Throws lacuna::Error for a program without
// pipeline coordinates or compute.
PassTimes mean_pass_times(const ir::Program& program, const cost::CostModel& cost);

}  // namespace lacuna::compiler
