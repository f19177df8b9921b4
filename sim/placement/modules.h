// Pieces every multimodal placement shares: the LLM-only view of a scenario,
// module descriptions for ProgramInfo, and the whole-MLLM FLOP totals.
#pragma once

#include <cstdint>

#include "sim/compiler/module_recompute.h"
#include "sim/model/mllm.h"
#include "sim/proto/program.pb.h"
#include "sim/scenario/scenario.h"

namespace lacuna::placement {

// The scenario without its encoders (and placement): what the LLM alone runs.
scenario::LoadedScenario llm_only(const scenario::LoadedScenario& scenario);

// The recompute the scenario asks of the LLM (parallel.recompute, and
// recompute_num_layers with full recompute).
compiler::ModuleRecompute llm_recompute(const scenario::Scenario& spec);
// The scenario with the LLM recomputing as `r` (what a planner that raised it
// compiles).
scenario::LoadedScenario with_llm_recompute(const scenario::LoadedScenario& scenario,
                                            const compiler::ModuleRecompute& r);

// Module 0: the LLM in the scenario's parallel plan, ranks [0, world).
ir::ModuleInfo llm_module_info(const scenario::Scenario& spec);
// Module e + 1: encoder e (projector included) in `layout` on
// [first_rank, first_rank + tp·cp·pp·dp).
ir::ModuleInfo encoder_module_info(const scenario::Scenario& spec, int e, const scenario::ModuleLayout& layout);

// Fills the program's info.modules (each with the recompute it runs: the
// LLM's from spec.parallel, an encoder's from its layout), placement, and adds
// the encoders' model / hardware FLOPs to the LLM's (already set by
// compiler::compile); num_ranks is left as is. With block recompute the
// hardware FLOPs count the encoder layers the program recomputes.
void add_multimodal_info(const scenario::Scenario& spec, scenario::PlacementKind placement,
                         const std::vector<scenario::ModuleLayout>& encoder_layouts, ir::Program& program);

// Distinct layers of `module` that have RECOMPUTE kernels in the program.
int64_t recomputed_layers(const ir::Program& program, int32_t module);

}  // namespace lacuna::placement
