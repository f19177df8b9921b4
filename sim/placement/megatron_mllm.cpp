#include "sim/placement/megatron_mllm.h"

#include <algorithm>
#include <string>
#include <vector>

#include "sim/compiler/layer_chain.h"
#include "sim/compiler/rank_layout.h"
#include "sim/compiler/segment_inputs.h"
#include "sim/compiler/stage_program.h"
#include "sim/core/error.h"
#include "sim/cost/group_shape.h"
#include "sim/model/mllm.h"
#include "sim/scenario/execution.h"
#include "sim/scenario/nvlink_domain.h"
#include "sim/schedule/schedule.h"

namespace lacuna::placement {
namespace {

// Megatron runs every encoder in the LLM's layout: its image sequences are
// split by the LLM's CP and, under SP, its tokens by the LLM's TP. Validation
// checks the TP divisibility of the encoder's sizes; these splits are checked
// here, where the shapes are built (a silent truncation would drop work).
void check_encoder_splits(const scenario::LoadedScenario& scenario, const model::ShardSpec& shard) {
  const auto& spec = scenario.spec;
  const int64_t mb = spec.training().micro_batch();
  for (int e = 0; e < spec.model().encoders_size(); ++e) {
    const int64_t tokens = model::encoder_tokens_per_image(spec, e);
    const int64_t vision = model::vision_tokens_per_sample(spec, e);
    const int64_t images = model::images_per_sample(spec, e);
    if (shard.cp > 1 && (tokens % shard.cp != 0 || (mb * vision) % shard.cp != 0))
      throw Error(scenario.locations.locate("parallel.cp"),
                  "cp=" + std::to_string(shard.cp) + " (the LLM's, which the Megatron placements give the encoders) "
                  "must divide encoder " + std::to_string(e) + "'s " + std::to_string(tokens) +
                      " tokens per image and its " + std::to_string(mb * vision) +
                      " projector output tokens per microbatch",
                  "choose cp dividing both, or a placement with an encoder layout of its own (HETEROGENEOUS)");
    if (shard.sequence_parallel &&
        ((mb * images * tokens / shard.cp) % shard.tp != 0 || (mb * vision / shard.cp) % shard.tp != 0))
      throw Error(scenario.locations.locate("parallel.sequence_parallel"),
                  "sequence parallelism splits encoder " + std::to_string(e) + "'s tokens of a microbatch over tp=" +
                      std::to_string(shard.tp) + ", which divides neither its encoder tokens (" +
                      std::to_string(mb * images * tokens / shard.cp) + " per CP rank) nor its projector output (" +
                      std::to_string(mb * vision / shard.cp) + ") evenly",
                  "choose images per sample, token_merge and tp so that both are multiples of tp, or set "
                  "sequence_parallel: false");
  }
}

// How the group of rank 0 along `axis` (0 tp, 1 cp) sits on the NVLink
// domains of `domain_gpus` GPUs (scenario::nvlink_domain_gpus).
cost::GroupShape group_shape(const compiler::RankLayout& layout, int64_t domain_gpus, int axis) {
  const int32_t size = axis == 0 ? layout.dims().tp : layout.dims().cp;
  std::vector<int64_t> nodes(static_cast<size_t>(size));
  for (int32_t i = 0; i < size; ++i) {
    ir::Coordinates c;
    if (axis == 0) {
      c.set_tp(i);
    } else {
      c.set_cp(i);
    }
    nodes[static_cast<size_t>(i)] = layout.rank(c) / domain_gpus;
  }
  return cost::shape_of_nodes(std::move(nodes));
}

// MoE: the expert groups of stage 0's first rank (add_expert_layout's
// numbering) as they sit on the NVLink domains, for timing the chain's MoE
// layers.
void add_expert_group_shapes(const model::LayerShape& shape, const compiler::RankLayout& layout, int64_t domain_gpus,
                             compiler::ChainGroups& groups) {
  if (!shape.moe.enabled()) return;
  const compiler::ParallelDims& d = layout.dims();
  auto rank_of_local = [&](int64_t local) {
    ir::Coordinates c;
    c.set_tp(static_cast<int32_t>(local % d.tp));
    c.set_cp(static_cast<int32_t>((local / d.tp) % d.cp));
    c.set_dp(static_cast<int32_t>(local / (static_cast<int64_t>(d.tp) * d.cp)));
    return layout.rank(c);
  };
  std::vector<int64_t> ep_nodes, tp_nodes;
  for (int64_t i = 0; i < shape.moe.ep; ++i) ep_nodes.push_back(rank_of_local(i * shape.moe.expert_tp) / domain_gpus);
  for (int64_t i = 0; i < shape.moe.expert_tp; ++i) tp_nodes.push_back(rank_of_local(i) / domain_gpus);
  std::vector<int64_t> intra, inter;
  for (int64_t n : ep_nodes)
    if (n == ep_nodes.front()) intra.push_back(n);
  std::vector<int64_t> seen;
  for (int64_t n : ep_nodes)
    if (std::find(seen.begin(), seen.end(), n) == seen.end()) seen.push_back(n);
  inter = seen;  // one member per domain
  groups.ep = cost::shape_of_nodes(ep_nodes);
  groups.expert_tp = cost::shape_of_nodes(tp_nodes);
  groups.ep_intra_domain = cost::shape_of_nodes(intra);
  groups.ep_inter_domain = cost::shape_of_nodes(inter);
}

// Chunks per pipeline rank of the balanced chain, checked for interleaving.
int32_t balanced_virtual_stages(const scenario::LoadedScenario& scenario, const compiler::PipelinePlan& plan) {
  const auto& spec = scenario.spec;
  const bool own = spec.placement().balanced_virtual_stages() > 0;
  const int64_t v = own ? spec.placement().balanced_virtual_stages() : spec.parallel().virtual_stages();
  const std::string v_path = own ? "placement.balanced_virtual_stages" : "parallel.virtual_stages";
  if (plan.dims.pp < 2)
    throw Error(scenario.locations.locate("parallel.pp"),
                "MEGATRON_BALANCED runs interleaved 1F1B over the encoder + LLM chain, which needs pp ≥ 2 (pp is " +
                    std::to_string(plan.dims.pp) + ")",
                "use pp ≥ 2, or MEGATRON_BASELINE");
  if (v < 2)
    throw Error(scenario.locations.locate(v_path),
                "MEGATRON_BALANCED needs at least 2 model chunks per pipeline rank (interleaved 1F1B); " + v_path +
                    " gives " + std::to_string(v),
                "set placement.balanced_virtual_stages ≥ 2 (the Optimus paper uses 6 for LLAMA-70B, 12 for GPT-175B)");
  if (plan.microbatches % plan.dims.pp != 0)
    throw Error(scenario.locations.locate("training.global_batch"),
                "interleaved 1F1B needs the microbatches per pipeline (" + std::to_string(plan.microbatches) +
                    ") to be a multiple of pp = " + std::to_string(plan.dims.pp),
                "choose global_batch / (micro_batch × dp) divisible by pp");
  return static_cast<int32_t>(v);
}

}  // namespace

ir::Program compile_megatron_mllm(const scenario::LoadedScenario& scenario, scenario::PlacementKind kind,
                                  const cost::CostModel& cost,
                                  const std::vector<compiler::ModuleRecompute>& encoder_recompute) {
  const auto& spec = scenario.spec;
  const auto& par = spec.parallel();
  if (kind != scenario::MEGATRON_BASELINE && kind != scenario::MEGATRON_BALANCED &&
      kind != scenario::MEGATRON_LAYER_SPLIT)
    throw Error(scenario.locations.locate("placement.kind"),
                "compile_megatron_mllm builds MEGATRON_BASELINE, MEGATRON_BALANCED or MEGATRON_LAYER_SPLIT, not " +
                    scenario::PlacementKind_Name(kind),
                "compile other placements through placement::compile");
  const int num_encoders = spec.model().encoders_size();
  if (num_encoders == 0)
    throw Error(scenario.locations.locate("model"), "the Megatron multimodal placements need at least one encoder",
                "add model.encoders, or compile the LLM alone");
  const compiler::PipelinePlan plan = compiler::pipeline_plan(scenario);
  const compiler::RankLayout layout(plan.dims, par.rank_order());
  // Megatron shares one layout: every encoder runs in the LLM's TP / CP / SP
  // on microbatches of the LLM's micro_batch samples, recomputing like it.
  const model::ShardSpec shard{plan.dims.tp, plan.dims.cp, plan.dims.pp, par.sequence_parallel() && plan.dims.tp > 1};
  check_encoder_splits(scenario, shard);
  const bool balanced = kind == scenario::MEGATRON_BALANCED;
  // Both cut the encoder + LLM layer chain: balanced by time, layer split by
  // layer count (in the scenario's schedule and virtual stages).
  const bool chained = balanced || kind == scenario::MEGATRON_LAYER_SPLIT;
  const int32_t v = balanced ? balanced_virtual_stages(scenario, plan)
                             : (par.virtual_stages() > 0 ? static_cast<int32_t>(par.virtual_stages()) : 1);
  compiler::StageInputs base = compiler::llm_stage_inputs(scenario, plan, v, /*plan_layers=*/!chained);
  if (!encoder_recompute.empty() && static_cast<int>(encoder_recompute.size()) != num_encoders)
    throw InternalError("compile_megatron_mllm: internal error, " + std::to_string(encoder_recompute.size()) +
                " encoder recompute choices for " + std::to_string(num_encoders) + " encoders");
  for (int e = 0; e < num_encoders; ++e) {
    const compiler::ModuleRecompute r =
        encoder_recompute.empty() ? compiler::ModuleRecompute{par.recompute(), 0}
                                  : encoder_recompute[static_cast<size_t>(e)];
    base.encoders.push_back(compiler::encoder_work(spec, e, plan.micro_batch, shard, r.mode, r.num_layers));
  }
  const int32_t num_vs = plan.dims.pp * v;
  const int64_t llm_layers = spec.model().llm().num_layers();
  std::vector<std::string> stage_names;

  if (!chained) {
    // Baseline: the encoders, one after another, in the pre-process of
    // virtual stage 0 (before the LLM's embedding forward, after its backward).
    base.segments.resize(static_cast<size_t>(num_vs));
    for (int32_t k = 0; k < num_vs; ++k) {
      if (k == 0)
        for (int e = 0; e < num_encoders; ++e)
          base.segments[0].push_back(
              compiler::Segment{e + 1, 0, base.encoders[static_cast<size_t>(e)].num_layers, true, true});
      const compiler::LayerRange& r = base.stages[static_cast<size_t>(k)];
      base.segments[k].push_back(compiler::Segment{0, r.first, r.count, k == 0, k == num_vs - 1});
    }
  } else {
    const int64_t domain_gpus = scenario::nvlink_domain_gpus(spec.cluster());
    compiler::ChainGroups groups;
    groups.tp = group_shape(layout, domain_gpus, 0);
    groups.cp = group_shape(layout, domain_gpus, 1);
    add_expert_group_shapes(base.shape, layout, domain_gpus, groups);
    const auto chain = compiler::layer_chain(base, llm_layers, cost, groups);
    if (static_cast<int64_t>(chain.size()) < num_vs)
      throw Error(scenario.locations.locate(balanced && spec.placement().balanced_virtual_stages() > 0
                                                ? "placement.balanced_virtual_stages"
                                            : (balanced || v > 1) ? "parallel.virtual_stages"
                                                                  : "parallel.pp"),
                  "the encoder + LLM chain has " + std::to_string(chain.size()) +
                      " layers, fewer than pp × virtual stages = " + std::to_string(num_vs),
                  "use fewer virtual stages (at most " + std::to_string(chain.size() / plan.dims.pp) + ")");
    std::vector<int64_t> times;
    for (const compiler::ChainLayer& link : chain) times.push_back(link.time_ns);
    const auto sizes = balanced ? compiler::partition_chain(times, num_vs)
                                : compiler::partition_by_count(static_cast<int64_t>(chain.size()), num_vs);
    std::vector<int64_t> layers{llm_layers};
    for (const compiler::ModuleWork& w : base.encoders) layers.push_back(w.num_layers);
    base.segments = compiler::chain_segments(chain, sizes, layers);
    // `stages` keeps the LLM's share of each virtual stage (empty where a
    // stage holds encoder layers only), for readers of LLM layer ranges.
    int64_t next = 0;
    for (const auto& stage : base.segments) {
      compiler::LayerRange r{next, 0};
      for (const compiler::Segment& seg : stage)
        if (seg.module == 0) r = {seg.first, seg.count};
      next = r.first + r.count;
      base.stages.push_back(r);
      stage_names.push_back(compiler::describe_segments(stage));
    }
  }

  const auto schedule_kind = balanced ? scenario::INTERLEAVED_1F1B : spec.schedule().kind();
  const auto actions = schedule::build_schedule(schedule_kind, base.pipeline);
  ir::Program program;
  *program.mutable_cluster() = spec.cluster();
  compiler::add_rank_layout(layout, static_cast<int32_t>(plan.gpus_per_node), program,
                            spec.parallel().distributed_optimizer());
  compiler::add_moe_layout(scenario, layout, program);  // a MoE LLM's expert groups (docs/moe.md)
  compiler::add_fp8_layout(scenario, layout, program);  // delayed scaling's amax groups (docs/fp8.md)
  base.schedule_kind = schedule_kind;
  if (balanced) {
    // The balanced placement always interleaves: its p2p default is the
    // software's interleaved one.
    scenario::Scenario interleaved = spec;
    interleaved.mutable_schedule()->set_kind(scenario::INTERLEAVED_1F1B);
    base.execution = scenario::resolve_execution(interleaved, scenario.locations);
  }
  compiler::add_stage_classes(scenario, base, actions, program);
  if (chained) {
    // The partition, in the class names: "pp0 [vs0 enc0:patch+L0-11 | vs2 …]".
    for (int32_t r = 0; r < plan.dims.pp; ++r) {
      std::string name = "pp" + std::to_string(r) + " [";
      for (int32_t c = 0; c < v; ++c) {
        const int32_t k = schedule::virtual_stage(base.pipeline, r, c);
        name += (c > 0 ? " | vs" : "vs") + std::to_string(k) + " " + stage_names[static_cast<size_t>(k)];
      }
      program.mutable_classes(r)->set_name(name + "]");
    }
  }
  auto* info = program.mutable_info();
  compiler::fill_program_info(scenario, plan, base, schedule_kind, *info);
  info->set_placement(kind);
  return program;
}

}  // namespace lacuna::placement
