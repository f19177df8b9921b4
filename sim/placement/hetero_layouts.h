// Heterogeneous layouts a user would pick (docs/placements.md,
// "Choosing the heterogeneous layouts"): when a scenario gives no encoder
// layout, or one of the other mode, lacuna derives one —
// - colocated: a search over encoder (TP, DP) layouts on the LLM's GPUs,
//   each compiled with the cheapest recompute that fits HBM (fit_recompute),
//   pruned by memory, ranked by a folded simulation (fixed-duration network);
// - non-colocated: an island of whole nodes per encoder, the smallest whose
//   steady-state time per LLM microbatch keeps up with the LLM's and whose
//   ranks fit HBM.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/cost/cost_model.h"
#include "sim/proto/program.pb.h"
#include "sim/scenario/scenario.h"

namespace lacuna::placement {

enum class HeteroMode { kColocated, kNonColocated };
std::string_view hetero_mode_name(HeteroMode mode);  // "colocated" / "non-colocated"

struct HeteroChoice {
  HeteroMode mode = HeteroMode::kColocated;
  scenario::LoadedScenario scenario;  // every encoder's layout set; for islands the cluster holds them
  ir::Program program;                // compile_as(scenario, HETEROGENEOUS): recompute fitted, overheads applied
  bool derived = false;               // false: the scenario's own layouts
  int32_t candidates = 0;             // layouts compiled
  int32_t pruned_by_memory = 0;       // of those, over HBM at the best recompute
  int32_t not_buildable = 0;          // rejected by the compiler's rules (containment, DP relation, ...)
  int32_t island_gpus = 0;            // all islands (non-colocated)
  int64_t cluster_nodes = 0;          // the cluster the program runs on
  int64_t scenario_nodes = 0;         // the scenario's own cluster.num_nodes
  int64_t llm_period_ns = 0;          // non-colocated: LLM time per microbatch (llm_period_ns)
  int64_t island_period_ns = 0;       // non-colocated: the slowest island's (island_period_ns)
  std::string description;            // one line for reports: layouts, recompute, islands
};

// The heterogeneous placement in `mode` (layouts the scenario gives in that
// mode are kept; otherwise derived as above). Throws lacuna::Error naming the
// field when nothing can be built: an island that cannot hold its encoder even
// at full recompute (the scenario's: model.encoders[e].layout.dp; derived:
// model.encoders[e]), no colocated layout the compiler accepts.
HeteroChoice choose_heterogeneous(const scenario::LoadedScenario& scenario, HeteroMode mode,
                                  const cost::CostModel& cost);
HeteroChoice choose_heterogeneous(const scenario::LoadedScenario& scenario, HeteroMode mode);

// Candidate layouts of encoder `e` (recompute NONE; fit_recompute raises it):
// colocated on the LLM's world; on an island of `island_gpus` GPUs starting at
// `first_rank`. In enumeration order (the tie-break): pp ascending, then tp
// ascending. Only shape rules are applied here; the compiler's checks come at
// compile time.
std::vector<scenario::ModuleLayout> colocated_candidates(const scenario::LoadedScenario& scenario, int e);
std::vector<scenario::ModuleLayout> island_candidates(const scenario::LoadedScenario& scenario, int e,
                                                      int32_t island_gpus, int32_t first_rank);

// The steady-state time per LLM microbatch (1F1B delivers one microbatch per
// period of its busiest stage): max over the ranks of `module` of its compute
// kernels' time (cost model; fixed durations as written) divided by the
// microbatches each of its ranks runs. Communication is not counted on either
// side. The LLM's: of module 0 in the LLM-only program; an island's: of
// encoder module e + 1 on its island ranks.
int64_t module_period_ns(const ir::Program& program, int32_t module, int32_t microbatches,
                         const cost::CostModel& cost);

// Whether every rank in [first, last) fits its GPU's HBM.
bool ranks_fit(const ir::Program& program, int32_t first, int32_t last);

}  // namespace lacuna::placement
