#include "sim/placement/optimus_planner.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "sim/compiler/compile.h"
#include "sim/compiler/memory_overheads.h"
#include "sim/core/error.h"
#include "sim/cost/memory.h"
#include "sim/cost/memory_peak.h"
#include "sim/placement/modules.h"
#include "sim/placement/optimus_emit.h"
#include "sim/placement/recompute_ladder.h"

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

namespace {

// The LLM compiled at one recompute, with its timeline.
struct LlmAt {
  compiler::ModuleRecompute recompute;
  int32_t warmup_deferral = 0;
  ir::Program llm;
  LlmTimeline timeline;
};

LlmAt llm_at(const scenario::LoadedScenario& scenario, const compiler::ModuleRecompute& r,
             const cost::CostModel& cost, int32_t warmup_deferral = 0) {
  LlmAt at;
  at.recompute = r;
  at.warmup_deferral = warmup_deferral;
  // The bubble scheduler does not model the per-microbatch batch broadcast
  // over TP yet (its encoder placements can then cross it into a cycle between
  // TP ranks): Optimus programs leave it out (docs/placements.md, limits).
  scenario::LoadedScenario llm = with_llm_recompute(llm_only(scenario), r);
  llm.spec.mutable_execution()->set_batch_broadcast(scenario::BROADCAST_NONE);
  at.llm = compiler::compile(llm, compiler::CompileOptions{.interleaved_warmup_deferral = warmup_deferral});
  compiler::apply_memory_overheads(at.llm);
  at.timeline = llm_timeline(at.llm, cost);
  return at;
}

// Every applicable plan at one LLM recompute: each at the cheapest encoder
// recompute at which it fits; `fitting` empty when none does.
struct PlansAt {
  std::vector<EncoderFit> fitting;
  std::optional<EncoderFit> least;  // the least memory of those that do not fit
  int32_t pruned = 0;
};

PlansAt plans_at(const scenario::Scenario& spec, const std::vector<Geometry>& plans, bool sp,
                 const compiler::ModuleRecompute& encoder_asked, const LlmAt& at, const cost::CostModel& cost) {
  PlansAt out;
  for (const Geometry& geo : plans) {
    EncoderFit f = fit_encoder_recompute(spec, geo, sp, encoder_asked, at.llm, at.timeline, cost);
    if (f.fits) {
      out.fitting.push_back(std::move(f));
      continue;
    }
    ++out.pruned;
    if (!out.least || f.memory < out.least->memory) out.least = std::move(f);
  }
  return out;
}

// The best (plan, split) over the plans that fit at one LLM timeline (or the
// least-memory plan when none does).
struct Searched {
  std::vector<EncoderFit> candidates;
  bool fits = true;
  int64_t estimate = std::numeric_limits<int64_t>::max();
  size_t plan = 0;
  std::vector<int32_t> split;
  Bytes memory;
  int32_t pruned = 0;  // plans over HBM at every encoder recompute
};

Searched search_splits(const LlmAt& at, PlansAt found, Bytes capacity, int64_t cap_splits,
                       const PlannerOptions& options, const cost::CostModel& cost, PlannerResult& stats) {
  Searched out;
  out.fits = !found.fitting.empty();
  // Nothing fits: keep the plan needing the least memory (the memory report
  // then shows the overflow) rather than refusing the comparison.
  out.candidates = out.fits ? std::move(found.fitting) : std::vector<EncoderFit>{std::move(*found.least)};
  out.pruned = found.pruned;
  const int32_t n = at.timeline.microbatches;
  for (size_t i = 0; i < out.candidates.size(); ++i) {
    const EncoderFit& fe = out.candidates[i];
    const SchedulerInput input = make_scheduler_input(at.timeline, fe.work, at.llm, cost);
    BubbleScheduler scheduler(input);
    ++stats.plans_evaluated;
    std::vector<int64_t> bubble_ns(static_cast<size_t>(fe.work.geo.pipelines()), 0);
    for (int32_t e = 0; e < fe.work.geo.pipelines(); ++e)
      for (int32_t j = 0; j < fe.work.geo.pp_enc; ++j)
        bubble_ns[static_cast<size_t>(e)] +=
            at.timeline.stages[static_cast<size_t>(fe.work.geo.llm_stage(e, j))].bubble_ns();
    for (const auto& split : enumerate_splits(n, fe.work.geo.pipelines(), cap_splits, bubble_ns)) {
      // A split that puts more microbatches on a pipeline than the plan's
      // recompute was chosen for may not fit (the even split does).
      const Bytes memory = plan_peak_memory_bytes(at.llm, at.timeline, fe.work, split);
      if (out.fits && capacity > Bytes::zero() && memory > capacity) continue;
      const int64_t estimate = scheduler.evaluate(split, options.coarse_only);
      ++stats.splits_evaluated;
      if (options.keep_candidates) stats.candidates.push_back({fe.work.geo, split, estimate});
      if (estimate < out.estimate) {
        out.estimate = estimate;
        out.split = split;
        out.plan = i;
        out.memory = memory;
      }
    }
  }
  return out;
}

}  // namespace

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
  const int32_t first_deferral = options.fixed_deferral.value_or(0);
  LlmAt at = llm_at(scenario, llm_recompute(spec), cost, first_deferral);
  const auto& info = at.llm.info();
  Geometry llm_geo;
  llm_geo.tp_llm = std::max(1, info.tp());
  llm_geo.pp_llm = std::max(1, info.pp());
  llm_geo.dp_llm = std::max(1, info.dp());

  scenario::ModuleLayout layout;
  out.fixed_plan = fixed_layout(scenario, layout);
  std::vector<Geometry> plans;
  bool sp = spec.parallel().sequence_parallel();
  // The encoders recompute like the LLM (every layer) unless their fixed
  // layout says otherwise.
  compiler::ModuleRecompute encoder_asked{spec.parallel().recompute(), 0};
  if (out.fixed_plan) {
    plans.push_back(checked_fixed_geometry(scenario, layout, llm_geo));
    sp = layout.sequence_parallel();
    encoder_asked = {layout.recompute(),
                     layout.recompute() == scenario::RECOMPUTE_FULL ? layout.recompute_num_layers() : 0};
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
    std::vector<Geometry> all =
        enumerate_geometries(llm_geo.tp_llm, llm_geo.pp_llm, llm_geo.dp_llm, max_encoder_layers(spec));
    for (const Geometry& geo : all) {
      if (plan_problem(spec, geo, sp).empty()) {
        plans.push_back(geo);
      } else {
        ++out.plans_not_applicable;
      }
    }
    if (plans.empty())
      throw Error(scenario.locations.locate("model.encoders"),
                  "no encoder plan of Optimus applies: every encoder tp dividing the LLM's tp " +
                      str(llm_geo.tp_llm) + " leaves encoder sizes that do not split",
                  "choose encoder head / FFN sizes divisible by a divisor of the LLM's tp");
  }
  out.sequence_parallel = sp;

  // The encoders' recompute rises first (per plan, up to full recompute of
  // every layer): their passes sit in the LLM's bubbles, where recompute is
  // partly free, while the LLM's own recompute lengthens its critical path.
  // Only when no plan fits does the LLM's rise, rung by rung in order of its
  // recompute time (docs/memory-model.md, "Choosing the recompute").
  PlansAt found = plans_at(spec, plans, sp, encoder_asked, at, cost);
  if (found.fitting.empty()) {
    const int64_t chunk_layers = std::max<int64_t>(1, max_chunk_layers(at.llm, 0));
    const auto ladder = recompute_ladder(chunk_layers);
    std::vector<LlmAt> higher;
    for (size_t k = static_cast<size_t>(ladder_position(at.recompute, chunk_layers)) + 1; k < ladder.size(); ++k)
      higher.push_back(llm_at(scenario, ladder[k], cost, first_deferral));
    std::stable_sort(higher.begin(), higher.end(), [&](const LlmAt& a, const LlmAt& b) {
      return recompute_time_ns(a.llm, 0, cost) < recompute_time_ns(b.llm, 0, cost);
    });
    for (LlmAt& next : higher) {
      PlansAt f = plans_at(spec, plans, sp, encoder_asked, next, cost);
      const bool fits = !f.fitting.empty();
      // Nothing fits anywhere: keep the least memory, the LLM's top rung.
      if (fits || next.recompute == ladder.back()) {
        at = std::move(next);
        found = std::move(f);
      }
      if (fits) break;
    }
  }
  const int64_t cap_splits =
      options.max_splits_per_plan > 0 ? options.max_splits_per_plan : kDefaultMaxSplits;
  const Bytes capacity = cost::hbm_capacity_bytes(spec.cluster());
  Searched best = search_splits(at, std::move(found), capacity, cap_splits, options, cost, out);
  out.llm_megatron_iteration_ns = at.timeline.iteration_ns;

  // Optimus's dependency-point deferral (interleaved 1F1B): fewer warm-up
  // forwards on the upstream ranks move the LLM's late forward dependency
  // points F_i later, opening room for encoder forwards; each deferral is
  // compiled and simulated, and kept only where the estimate improves (ties:
  // the smaller deferral, so Megatron-LM's schedule where nothing is gained).
  // By value: `at` is replaced inside the loop when a deferral wins.
  const int32_t llm_pp = at.llm.info().pp();
  const bool interleaved = at.llm.info().schedule() == scenario::INTERLEAVED_1F1B;
  if (options.defer && !options.fixed_deferral && interleaved && llm_pp >= 2) {
    for (int32_t d = 1; d <= 2 * (llm_pp - 1); ++d) {
      std::optional<LlmAt> deferred;
      try {
        deferred = llm_at(scenario, at.recompute, cost, d);
      } catch (const Error&) {
        continue;  // this deferral deadlocks the LLM's blocking p2p: not a schedule
      }
      ++out.deferrals_evaluated;
      // The estimate is never below the LLM's own iteration.
      if (best.fits && deferred->timeline.iteration_ns >= best.estimate) continue;
      PlansAt f = plans_at(spec, plans, sp, encoder_asked, *deferred, cost);
      if (best.fits && f.fitting.empty()) continue;
      // Its plans, splits and candidates count in `out` too.
      Searched s2 = search_splits(*deferred, std::move(f), capacity, cap_splits, options, cost, out);
      // A plan that fits HBM beats one that does not (fewer warm-up forwards
      // also hold fewer activations), then the lower estimate.
      if ((s2.fits && !best.fits) || (s2.fits == best.fits && s2.estimate < best.estimate)) {
        best = std::move(s2);
        at = std::move(*deferred);
      }
    }
  }
  out.plans_pruned_by_memory = best.pruned;
  out.fits = best.fits;
  out.peak_memory = best.memory;
  out.llm = std::move(at.llm);
  out.timeline = std::move(at.timeline);
  out.llm_recompute = at.recompute;
  out.warmup_deferral = at.warmup_deferral;
  out.search_estimate_ns = best.estimate;
  std::vector<EncoderFit> candidates = std::move(best.candidates);
  const size_t best_plan = best.plan;
  const std::vector<int32_t> best_split = best.split;

  EncoderFit& chosen = candidates[best_plan];
  out.geo = chosen.work.geo;
  out.encoder_recompute = chosen.recompute;
  out.work = std::move(chosen.work);
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
    l.set_recompute(r.encoder_recompute.mode);
    // The shared block size reads "every layer" for a branch with no more
    // layers on a stage.
    const int64_t most = stage_layers(spec.model().encoders(e).transformer().num_layers(), r.geo.pp_enc, 0).count;
    l.set_recompute_num_layers(r.encoder_recompute.num_layers >= most ? 0 : r.encoder_recompute.num_layers);
    layouts.push_back(l);
  }
  auto* info = program.mutable_info();
  // The LLM's module entry with the recompute it runs (r.llm was compiled so).
  add_multimodal_info(with_llm_recompute(scenario, r.llm_recompute).spec, scenario::OPTIMUS, layouts, program);
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
  o->set_warmup_deferral(r.warmup_deferral);
  o->set_forward_moves(r.schedule.forward_moves);
  o->set_backward_moves(r.schedule.backward_moves);
  o->set_kernel_level_cuts(r.schedule.forward_cuts);
  o->set_kernel_level_backward_cuts(r.schedule.backward_cuts);
  o->set_deferrals_evaluated(r.deferrals_evaluated);
  o->set_llm_megatron_iteration_ns(r.llm_megatron_iteration_ns);
  const BubbleProfile bp = bubble_profile(r.timeline);
  auto* p = o->mutable_bubble_profile();
  p->set_dp_all_gather_ns(bp.dp_all_gather_ns);
  p->set_pp_warmup_ns(bp.pp_warmup_ns);
  p->set_pp_other_ns(bp.pp_other_ns);
  p->set_tp_ns(bp.tp_ns);
  p->set_pp_cooldown_ns(bp.pp_cooldown_ns);
  p->set_dp_reduce_scatter_ns(bp.dp_reduce_scatter_ns);
  return program;
}

}  // namespace lacuna::placement::optimus
