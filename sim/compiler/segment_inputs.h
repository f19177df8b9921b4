// What compiler::compile (LLM-only) and the Megatron multimodal placements
// share: the checked parallel plan of a scenario, the LLM's StageInputs,
// encoders as pipeline modules (ModuleWork), the per-rank classes with their
// MemoryBaseline, and ProgramInfo.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/compiler/custom_schedule.h"
#include "sim/compiler/rank_layout.h"
#include "sim/compiler/stage_program.h"
#include "sim/cost/memory.h"
#include "sim/model/mllm.h"
#include "sim/proto/program.pb.h"
#include "sim/scenario/scenario.h"
#include "sim/schedule/p2p_calls.h"
#include "sim/schedule/schedule.h"

namespace lacuna::compiler {

// The scenario's LLM plan, checked against the cluster and the batch.
struct PipelinePlan {
  ParallelDims dims;
  int64_t gpus_per_node = 8;
  int64_t micro_batch = 1;
  int64_t global_batch = 1;
  int32_t microbatches = 1;  // per pipeline: global_batch / (micro_batch × dp)
};

// Throws lacuna::Error (located) when the ranks exceed the cluster or the
// global batch does not split into micro_batch × dp.
PipelinePlan pipeline_plan(const scenario::LoadedScenario& scenario);

cost::LayerActivationInputs activation_inputs(const model::LayerShape& shape, scenario::Recompute recompute);

// The LLM's StageInputs shared by every pipeline rank (pp_rank and actions
// unset) with `virtual_stages` chunks per rank; `stages` from plan_stages
// when `plan_layers`, else left empty for the caller.
StageInputs llm_stage_inputs(const scenario::LoadedScenario& scenario, const PipelinePlan& plan,
                             int32_t virtual_stages, bool plan_layers = true);

// Encoder e as a module of the LLM's pipeline (Megatron's placements), for
// microbatches of `samples` samples split by `shard`, recomputing as
// `recompute`: patch embedding before its first layer, final norm + projector
// after its last; frozen: forward only (the projector still trains) and no
// activations kept for backward but the projector's.
ModuleWork encoder_work(const scenario::Scenario& spec, int e, int64_t samples, const model::ShardSpec& shard,
                        scenario::Recompute recompute, int64_t recompute_num_layers = 0);

// Builds every pipeline rank's class from `base` and its schedule actions
// (refusing classes estimated above the op limit) into `program`, each with
// its MemoryBaseline: model state of its trained parameters, plus bf16
// weights of its frozen ones.
// `custom` (optional): a schedule file's extras per rank, its blocking calls
// as written out and its overlapped pairs.
void add_stage_classes(const scenario::LoadedScenario& scenario, const StageInputs& base,
                       const std::vector<std::vector<schedule::Action>>& actions, ir::Program& program,
                       const CustomSchedule* custom = nullptr);

// MoE scenarios: the expert group slots (add_expert_layout) after
// add_rank_layout; nothing for dense ones.
void add_moe_layout(const scenario::LoadedScenario& scenario, const RankLayout& layout, ir::Program& program);

// FP8 delayed scaling: the amax reduction slot (add_amax_layout) after the
// MoE slots; nothing for other programs.
void add_fp8_layout(const scenario::LoadedScenario& scenario, const RankLayout& layout, ir::Program& program);

// ProgramInfo of the LLM (model / hardware FLOPs of the LLM only; placement
// and modules left to the caller).
void fill_program_info(const scenario::LoadedScenario& scenario, const PipelinePlan& plan, const StageInputs& base,
                       scenario::ScheduleKind kind, ir::ProgramInfo& info);

}  // namespace lacuna::compiler
