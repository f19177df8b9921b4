// Planners choose the cheapest recompute that fits HBM
// (docs/memory-model.md#feasibility): per module (the LLM, each encoder) a
// ladder of Megatron-LM's recompute settings, from keeping every activation to
// recomputing every layer; the combination of rungs that fits with the least
// added recompute time wins, starting from what the scenario asks for.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/cost/cost_model.h"
#include "sim/placement/recompute_ladder.h"
#include "sim/proto/program.pb.h"

namespace lacuna::placement {

// The search's input: per module (index = Op.module), the recompute the
// scenario asks for, and whether it may be raised (a frozen encoder runs no
// backward, so it has nothing to recompute).
// `fixed_order`: the placement's op order does not depend on the recompute
// but for the recompute kernels it inserts (true for the Megatron baseline
// and the heterogeneous placement; not for the balanced one, whose partition
// follows the layers' times), which lets the search prove combinations
// infeasible without compiling them.
struct RecomputeRequest {
  std::vector<ModuleRecompute> requested;
  std::vector<bool> adjustable;
  bool fixed_order = false;
};

// Compiles the placement with one recompute per module: a complete program
// (ProgramInfo filled) with its memory overheads applied.
using CompileWithRecompute = std::function<ir::Program(const std::vector<ModuleRecompute>&)>;

struct RecomputeFit {
  ir::Program program;                  // the chosen combination's
  std::vector<ModuleRecompute> chosen;  // per module
  bool fits = true;
  int32_t programs_compiled = 0;
};

// The search (docs/memory-model.md, "Choosing the recompute"):
// 1. The requested combination; it fits (or the HBM is unknown): chosen.
// 2. Every adjustable module at its top rung (full recompute of every layer):
//    it does not fit → nothing fits, and the program of the two with the
//    lower worst peak is returned (fits = false).
// 3. Each rung's cost: NONE 0; SELECTIVE the module's recompute_time_ns with
//    the others as requested; block N block_recompute_time_ns of the program
//    with this module at its top rung and the others as requested. A
//    combination costs the sum over its modules. Combinations at or above the
//    requested rungs are taken in increasing (cost, rungs) order, and the
//    first that fits is chosen.
// With fixed_order, a combination a is known not to fit without compiling it
// when a compiled combination b that keeps no more of any layer than a
// (keeps_no_more, module by module) has a class whose peak exceeds the
// capacity by more than what b's recompute holds at once in that class
// (recompute_transient_bytes, plus its allocator reserve): op for op, b's
// running activation sum exceeds a's by at most those transients. Before
// compiling a, the search compiles such b (a module raised to its top rung,
// then halfway back towards a) to find one. The answer is the same as
// without this shortcut, with far fewer programs compiled.
// Throws what `compile` throws.
RecomputeFit fit_recompute(const RecomputeRequest& request, const CompileWithRecompute& compile,
                           const cost::CostModel& cost);

// Why a program does not fit, for reports: its worst rank's peak against the
// capacity, what the peak is made of (activations per module at the peak) and
// the recompute each module ran with. "" when it fits.
std::string infeasibility_reason(const ir::Program& program);

}  // namespace lacuna::placement
