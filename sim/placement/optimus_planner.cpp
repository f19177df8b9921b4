#include "sim/placement/optimus_planner.h"

#include <algorithm>
#include <limits>

#include "sim/compiler/compile.h"
#include "sim/core/error.h"
#include "sim/cost/memory.h"
#include "sim/placement/modules.h"
#include "sim/placement/optimus_emit.h"

namespace lacuna::placement::optimus {
namespace {

constexpr int64_t kDefaultMaxSplits = 4096;

std::string str(int64_t v) { return std::to_string(v); }

// The encoders' own layout, when it is the fixed Optimus plan (checked).
bool fixed_layout(const scenario::LoadedScenario& scenario, scenario::ModuleLayout& layout) {
  const auto& spec = scenario.spec;
  if (spec.placement().kind() != scenario::OPTIMUS) return false;
  int with = -1;
  for (int e = 0; e < spec.model().encoders_size(); ++e)
    if (spec.model().encoders(e).has_layout()) {
      if (with < 0) with = e;
      const auto& a = spec.model().encoders(e).layout();
      const auto& b = spec.model().encoders(with).layout();
      if (a.tp() != b.tp() || a.pp() != b.pp() || a.dp() != b.dp() || a.cp() != b.cp())
        throw Error(scenario.locations.locate("model.encoders[" + str(e) + "].layout"),
                    "Optimus schedules multi-branch encoders as one: every encoder layout must be the same plan",
                    "give every encoder the same layout, or none (the planner then chooses)");
    }
  if (with < 0) return false;
  for (int e = 0; e < spec.model().encoders_size(); ++e)
    if (!spec.model().encoders(e).has_layout())
      throw Error(scenario.locations.locate("model.encoders[" + str(e) + "]"),
                  "encoder " + str(e) + " has no layout while encoder " + str(with) + " has one; Optimus gives all "
                  "encoders one plan",
                  "give every encoder the same layout, or none (the planner then chooses)");
  layout = spec.model().encoders(with).layout();
  return true;
}

Geometry checked_fixed_geometry(const scenario::LoadedScenario& scenario, const scenario::ModuleLayout& l,
                                const Geometry& llm) {
  const std::string p = "model.encoders[0].layout.";
  auto fail = [&](const std::string& field, const std::string& what, const std::string& fix) {
    throw Error(scenario.locations.locate(p + field), what, fix);
  };
  const int64_t tp = l.tp() > 0 ? l.tp() : 1, pp = l.pp() > 0 ? l.pp() : 1, cp = l.cp() > 0 ? l.cp() : 1;
  if (cp != 1) fail("cp", "Optimus encoder plans have no context parallelism (cp " + str(cp) + ")", "set cp: 1");
  if (llm.tp_llm % tp != 0)
    fail("tp", "encoder tp " + str(tp) + " must divide the LLM's tp " + str(llm.tp_llm) + " for Optimus colocation",
         "choose a divisor of the LLM's tp");
  if (llm.pp_llm % pp != 0)
    fail("pp", "encoder pp " + str(pp) + " must divide the LLM's pp " + str(llm.pp_llm) + " for Optimus colocation",
         "choose a divisor of the LLM's pp");
  Geometry g = llm;
  g.tp_enc = static_cast<int32_t>(tp);
  g.pp_enc = static_cast<int32_t>(pp);
  const int64_t dp = l.dp() > 0 ? l.dp() : 1;
  if (dp != g.dp_enc() || l.first_rank() != 0)
    fail(dp != g.dp_enc() ? "dp" : "first_rank",
         "Optimus colocates the encoder on the LLM's GPUs: with tp " + str(tp) + " and pp " + str(pp) +
             " the encoder dp must be " + str(g.dp_enc()) + " and first_rank 0 (got dp " + str(dp) + ", first_rank " +
             str(l.first_rank()) + ")",
         "set dp: " + str(g.dp_enc()) + " first_rank: 0");
  return g;
}

int64_t max_encoder_layers(const scenario::Scenario& spec) {
  int64_t m = 1;
  for (const auto& e : spec.model().encoders()) m = std::max(m, e.transformer().num_layers());
  return m;
}

}  // namespace

int64_t plan_peak_memory_bytes(const ir::Program& llm, const LlmTimeline& timeline, const EncoderWork& work) {
  int64_t peak = 0;
  const Geometry& geo = work.geo;
  for (int32_t s = 0; s < geo.pp_llm; ++s) {
    const auto& mem = llm.classes(s).memory();
    const int64_t llm_bytes = mem.weights_bytes() + mem.gradients_bytes() + mem.optimizer_bytes() +
                              mem.other_bytes() + timeline.stages[static_cast<size_t>(s)].peak_activation_bytes;
    const StageWork& sw = work.stages[static_cast<size_t>(geo.encoder_stage(s))];
    const auto enc = cost::model_state_bytes(sw.trainable_parameters, geo.dp_enc(), work.distributed_optimizer);
    const int64_t frozen =
        cost::model_state_bytes(sw.frozen_parameters, geo.dp_enc(), work.distributed_optimizer).weights;
    peak = std::max(peak, llm_bytes + enc.weights + enc.gradients + enc.optimizer + frozen);
  }
  return peak;
}

PlannerResult plan_optimus(const scenario::LoadedScenario& scenario, const cost::CostModel& cost,
                           const PlannerOptions& options) {
  const auto& spec = scenario.spec;
  if (spec.model().encoders_size() == 0)
    throw Error(scenario.locations.locate("model.encoders"), "OPTIMUS needs at least one encoder",
                "add model.encoders, or drop the placement");
  if (spec.parallel().cp() > 1)
    throw Error(scenario.locations.locate("parallel.cp"),
                "OPTIMUS schedules encoder work into the bubbles of an LLM without context parallelism; "
                "parallel.cp is " + str(spec.parallel().cp()),
                "set parallel.cp: 1 (raise dp instead), or use placement HETEROGENEOUS");

  PlannerResult out;
  out.llm = compiler::compile(llm_only(scenario));
  out.timeline = llm_timeline(out.llm, cost);
  const auto& info = out.llm.info();
  Geometry llm_geo;
  llm_geo.tp_llm = std::max(1, info.tp());
  llm_geo.pp_llm = std::max(1, info.pp());
  llm_geo.dp_llm = std::max(1, info.dp());

  scenario::ModuleLayout layout;
  out.fixed_plan = fixed_layout(scenario, layout);
  std::vector<Geometry> plans;
  bool sp = spec.parallel().sequence_parallel();
  scenario::Recompute recompute = spec.parallel().recompute();
  if (out.fixed_plan) {
    plans.push_back(checked_fixed_geometry(scenario, layout, llm_geo));
    sp = layout.sequence_parallel();
    recompute = layout.recompute();
    const int64_t layers = max_encoder_layers(spec);
    if (plans[0].pp_enc > layers)
      throw Error(scenario.locations.locate("model.encoders[0].layout.pp"),
                  "encoder pp " + str(plans[0].pp_enc) + " exceeds the encoder's " + str(layers) +
                      " layers: a stage would hold none",
                  "choose pp ≤ " + str(layers));
    const std::string problem = plan_problem(spec, plans[0], sp);
    if (!problem.empty())
      throw Error(scenario.locations.locate("model.encoders[0].layout.tp"), "encoder layout: " + problem,
                  "choose another encoder tp");
  } else {
    plans = enumerate_geometries(llm_geo.tp_llm, llm_geo.pp_llm, llm_geo.dp_llm, max_encoder_layers(spec));
  }
  out.sequence_parallel = sp;
  out.recompute = recompute;

  const int64_t cap_splits =
      options.max_splits_per_plan > 0 ? options.max_splits_per_plan : kDefaultMaxSplits;
  const double capacity_gib = spec.cluster().gpu().has_hbm_capacity_gib() ? spec.cluster().gpu().hbm_capacity_gib() : 0;
  const int64_t capacity = capacity_gib > 0 ? static_cast<int64_t>(capacity_gib * 1073741824.0)
                                            : std::numeric_limits<int64_t>::max();
  const int32_t n = out.timeline.microbatches;

  struct Feasible {
    Geometry geo;
    int64_t memory;
  };
  std::vector<Feasible> fitting, over;
  for (const Geometry& geo : plans) {
    if (!out.fixed_plan && !plan_problem(spec, geo, sp).empty()) {
      ++out.plans_not_applicable;
      continue;
    }
    const EncoderWork work = build_encoder_work(spec, geo, sp, recompute, out.llm, cost);
    const int64_t memory = plan_peak_memory_bytes(out.llm, out.timeline, work);
    (memory <= capacity ? fitting : over).push_back({geo, memory});
  }
  out.plans_pruned_by_memory = static_cast<int32_t>(over.size());
  if (fitting.empty()) {
    if (over.empty())
      throw Error(scenario.locations.locate("model.encoders"),
                  "no encoder plan of Optimus applies: every encoder tp dividing the LLM's tp " +
                      str(llm_geo.tp_llm) + " leaves encoder sizes that do not split",
                  "choose encoder head / FFN sizes divisible by a divisor of the LLM's tp");
    // Nothing fits: keep the plan needing the least memory (the memory
    // report then shows the overflow) rather than refusing the comparison.
    fitting.push_back(*std::min_element(over.begin(), over.end(), [](const Feasible& a, const Feasible& b) {
      return a.memory < b.memory;
    }));
  }

  int64_t best = std::numeric_limits<int64_t>::max();
  std::vector<int32_t> best_split;
  Geometry best_geo;
  for (const Feasible& fe : fitting) {
    const EncoderWork work = build_encoder_work(spec, fe.geo, sp, recompute, out.llm, cost);
    const SchedulerInput input = make_scheduler_input(out.timeline, work, out.llm, cost);
    BubbleScheduler scheduler(input);
    ++out.plans_evaluated;
    std::vector<int64_t> bubble_ns(static_cast<size_t>(fe.geo.pipelines()), 0);
    for (int32_t e = 0; e < fe.geo.pipelines(); ++e)
      for (int32_t j = 0; j < fe.geo.pp_enc; ++j)
        bubble_ns[static_cast<size_t>(e)] += out.timeline.stages[static_cast<size_t>(fe.geo.llm_stage(e, j))].bubble_ns();
    for (const auto& split : enumerate_splits(n, fe.geo.pipelines(), cap_splits, bubble_ns)) {
      const int64_t estimate = scheduler.evaluate(split, options.coarse_only);
      ++out.splits_evaluated;
      if (options.keep_candidates) out.candidates.push_back({fe.geo, split, estimate});
      if (estimate < best) {
        best = estimate;
        best_split = split;
        best_geo = fe.geo;
        out.peak_memory_bytes = fe.memory;
      }
    }
  }

  out.geo = best_geo;
  out.work = build_encoder_work(spec, best_geo, sp, recompute, out.llm, cost);
  const SchedulerInput input = make_scheduler_input(out.timeline, out.work, out.llm, cost);
  BubbleScheduler scheduler(input);
  out.schedule = scheduler.schedule(best_split, options.coarse_only);
  out.coarse = scheduler.schedule(best_split, true);
  return out;
}

ir::Program emit_optimus(const scenario::LoadedScenario& scenario, const PlannerResult& r) {
  const auto& spec = scenario.spec;
  ir::Program program = emit_program(r.llm, r.timeline, r.work, r.schedule);
  std::vector<scenario::ModuleLayout> layouts;
  for (int e = 0; e < spec.model().encoders_size(); ++e) {
    scenario::ModuleLayout l;
    l.set_tp(r.geo.tp_enc);
    l.set_cp(1);
    l.set_pp(r.geo.pp_enc);
    l.set_dp(r.geo.dp_enc());
    l.set_virtual_stages(1);
    l.set_first_rank(0);
    l.set_sequence_parallel(r.work.sequence_parallel);
    l.set_recompute(r.recompute);
    layouts.push_back(l);
  }
  auto* info = program.mutable_info();
  add_multimodal_info(spec, scenario::OPTIMUS, layouts, program);
  auto* o = info->mutable_optimus();
  o->set_encoder_tp(r.geo.tp_enc);
  o->set_encoder_pp(r.geo.pp_enc);
  o->set_encoder_dp(r.geo.dp_enc());
  o->set_encoder_pipelines_per_llm_pipeline(r.geo.pipelines());
  for (int32_t v : r.schedule.split) o->add_microbatch_split(v);
  o->set_llm_only_iteration_ns(r.timeline.iteration_ns);
  o->set_estimated_iteration_ns(r.schedule.estimate_ns);
  o->set_coarse_efficiency(r.coarse.efficiency);
  o->set_fine_efficiency(r.schedule.efficiency);
  o->set_plans_evaluated(r.plans_evaluated);
  o->set_plans_pruned_by_memory(r.plans_pruned_by_memory);
  o->set_splits_evaluated(r.splits_evaluated);
  o->set_coarse_only(r.schedule.coarse_only);
  return program;
}

}  // namespace lacuna::placement::optimus
