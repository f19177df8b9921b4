// Optimus end to end: plan, schedule, emit, simulate. The simulated programs
// must keep every encoder ↔ LLM dependency, run no longer than the
// scheduler's estimate, and leave the LLM's own work where the scheduler
// predicted it.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "sim/compiler/memory_overheads.h"
#include "sim/cost/memory_peak.h"
#include "sim/engine/simulator.h"
#include "sim/model/mllm.h"
#include "sim/placement/class_edit.h"
#include "sim/placement/optimus.h"
#include "sim/placement/optimus_planner.h"
#include "sim/placement/optimus_test_support.h"
#include "sim/placement/recompute_ladder.h"

namespace lacuna::placement::optimus {
namespace {

using testing::make_mllm;
using testing::SmallEncoder;
using testing::SmallMllm;

std::unique_ptr<cost::CostModel> cost_of(const scenario::LoadedScenario& s) {
  return cost::make_analytic_cost_model(s.spec.cluster(), scenario::BF16);
}

// Every op of every simulated rank.
struct Trace : engine::Observer {
  struct Span {
    int32_t rank, stream, op;
    const ir::Op* ir;
    int64_t start, end;
  };
  std::vector<Span> spans;
  void on_op_end(const engine::OpSpan& s) override {
    spans.push_back({s.rank, s.stream, s.op, s.ir, s.start.count(), s.end.count()});
  }
};

struct Outcome {
  PlannerResult plan;
  ir::Program program;
  Trace trace;
  int64_t end = 0;
};

Outcome plan_and_simulate(const scenario::LoadedScenario& s, PlannerOptions options = {}) {
  const auto cost = cost_of(s);
  Outcome r;
  options.coarse_only = options.coarse_only || s.spec.placement().optimus().coarse_only();
  r.plan = plan_optimus(s, *cost, options);
  r.program = emit_optimus(s, r.plan);
  engine::Simulator sim(r.program, *cost, {.fold = true});
  sim.add_observer(&r.trace);
  r.end = sim.run().end_time.count();
  return r;
}

scenario::LoadedScenario with_layout(const SmallMllm& m, int64_t tp, int64_t pp, bool sp) {
  auto s = make_mllm(m);
  const int64_t slices = m.llm.tp / tp, pipelines = (m.llm.pp / pp) * slices;
  for (auto& enc : *s.spec.mutable_model()->mutable_encoders()) {
    auto* l = enc.mutable_layout();
    l->set_tp(tp);
    l->set_cp(1);
    l->set_pp(pp);
    l->set_dp(pipelines * m.llm.dp);
    l->set_first_rank(0);
    l->set_sequence_parallel(sp);
  }
  return s;
}

const ir::Stream& stream_of(const ir::Program& p, int32_t rank, int32_t stream) {
  return p.classes(p.ranks(rank).class_id()).streams(stream);
}

bool is_compute_stream(const ir::Program& p, int32_t rank, int32_t stream) {
  return stream_of(p, rank, stream).kind() == ir::COMPUTE;
}

bool is_backward(ir::Phase ph) { return ph == ir::BACKWARD_INPUT || ph == ir::BACKWARD_WEIGHT || ph == ir::RECOMPUTE; }

// The invariants every Optimus program must keep in its simulated trace.
// `estimate_bounds`: also check the scheduler's estimate and the δ bound on
// the LLM's kernels, which hold only for the execution mechanisms the
// scheduler models (SmallMllm::scheduler_semantics); the dependencies must
// hold whatever the execution.
void check_invariants(const scenario::LoadedScenario& s, const Outcome& r, bool estimate_bounds = true) {
  const ir::Program& p = r.program;
  const Geometry& geo = r.plan.geo;
  const int32_t n = r.plan.timeline.microbatches;
  const Schedule& sched = r.plan.schedule;
  // Simulated representative of each GPU class (lowest simulated rank).
  std::map<int32_t, int32_t> rep;
  for (const auto& sp : r.trace.spans) {
    auto [it, ins] = rep.try_emplace(p.ranks(sp.rank).class_id(), sp.rank);
    if (!ins) it->second = std::min(it->second, sp.rank);
  }
  ASSERT_EQ(static_cast<int32_t>(rep.size()), geo.pp_llm * geo.slices()) << "every GPU class is simulated";
  // Kernels of each representative's compute stream.
  std::map<int32_t, std::vector<const Trace::Span*>> kernels;
  for (const auto& sp : r.trace.spans)
    if (sp.ir->has_compute() && rep[p.ranks(sp.rank).class_id()] == sp.rank && is_compute_stream(p, sp.rank, sp.stream))
      kernels[sp.rank].push_back(&sp);
  auto rank_of_class = [&](int32_t s_llm, int32_t c) { return rep.at(geo.class_of(s_llm, c)); };

  // LLM dependency points per stage-0 slice.
  std::vector<int64_t> f(static_cast<size_t>(n), std::numeric_limits<int64_t>::max()), b(static_cast<size_t>(n), 0);
  for (int32_t c = 0; c < geo.slices(); ++c)
    for (const auto* k : kernels[rank_of_class(0, c)]) {
      if (k->ir->module() != 0 || k->ir->chunk() != 0) continue;
      const size_t i = static_cast<size_t>(k->ir->microbatch());
      if (k->ir->phase() == ir::FORWARD) f[i] = std::min(f[i], k->start);
      if (k->ir->phase() == ir::BACKWARD_INPUT) b[i] = std::max(b[i], k->end);
    }
  const bool trains_encoder = std::any_of(s.spec.model().encoders().begin(), s.spec.model().encoders().end(),
                                          [](const auto& e) { return !e.frozen(); });
  std::set<int32_t> microbatches_seen;
  for (int32_t i = 0; i < n; ++i) {
    const int32_t e = sched.source_pipeline[static_cast<size_t>(i)];
    // Encoder stages of pipeline e, upstream first: forward ends before the
    // next stage's forward begins, backward the other way round.
    int64_t prev_fwd_end = 0;
    std::vector<int64_t> bwd_start(static_cast<size_t>(geo.pp_enc), 0), bwd_end(static_cast<size_t>(geo.pp_enc), 0);
    for (int32_t j = 0; j < geo.pp_enc; ++j) {
      const int32_t rank = rank_of_class(geo.llm_stage(e, j), geo.slice_of_pipeline(e));
      int64_t fs = std::numeric_limits<int64_t>::max(), fe = 0, bs = std::numeric_limits<int64_t>::max(), be = 0;
      for (const auto* k : kernels[rank]) {
        if (k->ir->module() == 0 || k->ir->microbatch() != i || k->ir->phase() == ir::OPTIMIZER_STEP) continue;
        if (k->ir->phase() == ir::FORWARD) {
          fs = std::min(fs, k->start);
          fe = std::max(fe, k->end);
        } else if (is_backward(k->ir->phase())) {
          bs = std::min(bs, k->start);
          be = std::max(be, k->end);
        }
      }
      ASSERT_LT(fs, std::numeric_limits<int64_t>::max()) << "microbatch " << i << " has no forward on stage " << j;
      EXPECT_GE(fs, prev_fwd_end) << "microbatch " << i << ": encoder stage " << j << " starts before stage " << j - 1
                                  << " finished";
      prev_fwd_end = fe;
      if (j == 0) microbatches_seen.insert(i);
      bwd_start[static_cast<size_t>(j)] = bs;
      bwd_end[static_cast<size_t>(j)] = be;
      if (j == geo.pp_enc - 1) {
        // EF_i ≤ F_i: the vision embeddings exist before LLM stage 0 uses them.
        EXPECT_LE(fe, f[static_cast<size_t>(i)]) << "microbatch " << i << " consumed before it was produced";
        // EB_i ≥ B_i: the encoder backward starts after the LLM produced its gradient.
        ASSERT_LT(bs, std::numeric_limits<int64_t>::max()) << "microbatch " << i << " has no encoder backward";
        EXPECT_GE(bs, b[static_cast<size_t>(i)]) << "microbatch " << i << ": encoder backward before its gradient";
      }
    }
    if (trains_encoder) {
      for (int32_t j = geo.pp_enc - 1; j > 0; --j) {
        EXPECT_GE(bwd_start[static_cast<size_t>(j - 1)], bwd_end[static_cast<size_t>(j)])
            << "microbatch " << i << ": encoder backward of stage " << j - 1 << " before stage " << j << " finished";
      }
    }
  }
  EXPECT_EQ(static_cast<int32_t>(microbatches_seen.size()), n) << "every LLM microbatch has its encoder microbatch";

  // Every trained encoder layer's forward has its backward.
  std::set<std::tuple<int32_t, int32_t, int32_t, int32_t>> fwd, bwd;
  for (const auto& [rank, ks] : kernels)
    for (const auto* k : ks) {
      const int32_t module = k->ir->module();
      if (module == 0 || k->ir->layer() < 0) continue;
      if (s.spec.model().encoders(module - 1).frozen()) {
        EXPECT_FALSE(is_backward(k->ir->phase())) << "frozen encoder " << module - 1 << " runs a backward kernel";
        continue;
      }
      auto key = std::make_tuple(rank, module, k->ir->layer(), k->ir->microbatch());
      (k->ir->phase() == ir::FORWARD ? fwd : bwd).insert(key);
    }
  EXPECT_EQ(fwd, bwd);

  // The simulation never exceeds the scheduler's estimate, and the LLM's own
  // kernels end no later than in the LLM-only run shifted by δ (encoder work
  // only fills bubbles, or delays everything by δ at most).
  if (!estimate_bounds) return;
  EXPECT_LE(r.end, sched.estimate_ns) << "simulated " << r.end << " ns, estimated " << sched.estimate_ns;
  const auto cost = cost_of(s);
  engine::Simulator llm_sim(r.plan.llm, *cost, {.fold = true});
  Trace llm_trace;
  llm_sim.add_observer(&llm_trace);
  llm_sim.run();
  std::map<int32_t, std::vector<int64_t>> llm_ends;  // by stage: LLM-only kernel ends in stream order
  std::map<int32_t, int32_t> llm_rep;
  for (const auto& sp : llm_trace.spans) {
    auto [it, ins] = llm_rep.try_emplace(r.plan.llm.ranks(sp.rank).class_id(), sp.rank);
    if (!ins) it->second = std::min(it->second, sp.rank);
  }
  for (const auto& sp : llm_trace.spans) {
    const int32_t stage = r.plan.llm.ranks(sp.rank).class_id();
    if (llm_rep[stage] != sp.rank || !sp.ir->has_compute() || sp.ir->phase() == ir::OPTIMIZER_STEP) continue;
    if (!is_compute_stream(r.plan.llm, sp.rank, sp.stream)) continue;
    llm_ends[stage].push_back(sp.end);
  }
  for (auto& [stage, v] : llm_ends) std::sort(v.begin(), v.end());
  for (const auto& [rank, ks] : kernels) {
    const int32_t stage = p.ranks(rank).coord().pp();
    std::vector<int64_t> ends;
    for (const auto* k : ks)
      if (k->ir->module() == 0 && k->ir->phase() != ir::OPTIMIZER_STEP) ends.push_back(k->end);
    std::sort(ends.begin(), ends.end());
    const auto& ref = llm_ends[stage];
    ASSERT_EQ(ends.size(), ref.size()) << "the LLM's kernels of stage " << stage << " changed";
    int32_t late = 0;
    for (size_t k = 0; k < ends.size(); ++k) late += ends[k] > ref[k] + sched.delta_ns ? 1 : 0;
    EXPECT_EQ(late, 0) << "stage " << stage << ": " << late << " LLM kernels end later than LLM-only + δ";
  }
}

struct Variant {
  std::string name;
  std::function<scenario::LoadedScenario()> make;
};

std::vector<Variant> variants() {
  std::vector<Variant> v;
  auto base = [] {
    SmallMllm m;
    m.llm.global_batch = 32;  // 8 microbatches per pipeline
    return m;
  };
  v.push_back({"1f1b planned", [=] { return make_mllm(base()); }});
  v.push_back({"interleaved sp", [=] {
                 SmallMllm m = base();
                 m.llm.schedule = scenario::INTERLEAVED_1F1B;
                 m.llm.v = 2;
                 m.llm.sp = true;
                 return make_mllm(m);
               }});
  v.push_back({"gpipe", [=] {
                 SmallMllm m = base();
                 m.llm.schedule = scenario::GPIPE;
                 return make_mllm(m);
               }});
  v.push_back({"zb-h1", [=] {
                 SmallMllm m = base();
                 m.llm.schedule = scenario::ZB_H1;
                 return make_mllm(m);
               }});
  v.push_back({"fixed pp2 tp1 (encoder p2p)", [=] { return with_layout(base(), 1, 2, false); }});
  v.push_back({"fixed pp1 tp2 sp (encoder TP)", [=] {
                 SmallMllm m = base();
                 m.llm.sp = true;
                 return with_layout(m, 2, 1, true);
               }});
  v.push_back({"fixed pp2 tp2 sp, 4 stages", [=] {
                 SmallMllm m = base();
                 m.llm.pp = 4;
                 m.llm.layers = 8;
                 m.llm.dp = 1;
                 m.llm.sp = true;
                 m.llm.global_batch = 16;
                 return with_layout(m, 2, 2, true);
               }});
  v.push_back({"4 stages tp4, encoder tp1 pp2 (boundary fan-out)", [=] {
                 SmallMllm m = base();
                 m.llm.pp = 4;
                 m.llm.layers = 8;
                 m.llm.tp = 4;
                 m.llm.dp = 1;
                 m.llm.global_batch = 16;
                 m.llm.gpus_per_node = 8;
                 return with_layout(m, 1, 2, false);
               }});
  v.push_back({"pp1 (encoder on the LLM's only stage)", [=] {
                 SmallMllm m = base();
                 m.llm.pp = 1;
                 m.llm.dp = 4;
                 m.llm.global_batch = 64;
                 return make_mllm(m);
               }});
  v.push_back({"frozen encoder", [=] {
                 SmallMllm m = base();
                 m.encoders[0].frozen = true;
                 return with_layout(m, 1, 2, false);
               }});
  v.push_back({"two encoders, one frozen", [=] {
                 SmallMllm m = base();
                 SmallEncoder second;
                 second.layers = 2;
                 second.hidden = 64;
                 second.ffn = 256;
                 second.frozen = true;
                 second.projector_layers = 1;
                 m.encoders.push_back(second);
                 return make_mllm(m);
               }});
  v.push_back({"encoder DP bucket per layer", [=] {
                 SmallMllm m = base();
                 auto s = with_layout(m, 1, 2, false);
                 s.spec.mutable_parallel()->set_ddp_bucket_size(1);
                 return s;
               }});
  v.push_back({"no DP overlap, bucket per layer", [=] {
                 SmallMllm m = base();
                 m.llm.overlap_grad = false;
                 m.llm.overlap_param = false;
                 auto s = make_mllm(m);
                 s.spec.mutable_parallel()->set_ddp_bucket_size(1);
                 return s;
               }});
  v.push_back({"more encoder pipelines than microbatches", [=] {
                 SmallMllm m = base();
                 m.llm.tp = 4;
                 m.llm.dp = 1;
                 m.llm.global_batch = 8;  // 4 microbatches, 8 encoder pipelines
                 return with_layout(m, 1, 1, false);
               }});
  v.push_back({"two encoders over 4 stages, one with 2 layers", [=] {
                 SmallMllm m = base();
                 m.llm.pp = 4;
                 m.llm.layers = 8;
                 m.llm.dp = 1;
                 m.llm.global_batch = 16;
                 SmallEncoder second;
                 second.layers = 2;
                 second.hidden = 64;
                 second.ffn = 256;
                 m.encoders.push_back(second);
                 return with_layout(m, 1, 4, false);
               }});
  v.push_back({"no distributed optimizer", [=] {
                 SmallMllm m = base();
                 m.llm.distributed_optimizer = false;
                 return make_mllm(m);
               }});
  v.push_back({"coarse only", [=] {
                 SmallMllm m = base();
                 m.coarse_only = true;
                 return make_mllm(m);
               }});
  v.push_back({"heavy encoder", [=] {
                 SmallMllm m = base();
                 m.encoders[0].hidden = 512;
                 m.encoders[0].ffn = 2048;
                 m.encoders[0].heads = 8;
                 m.encoders[0].layers = 8;
                 return make_mllm(m);
               }});
  return v;
}

TEST(Optimus, SimulatedProgramsKeepEveryDependency) {
  int forward_moves = 0, backward_moves = 0, forward_cuts = 0, backward_cuts = 0;
  for (const auto& var : variants()) {
    SCOPED_TRACE(var.name);
    const auto s = var.make();
    const Outcome r = plan_and_simulate(s);
    const auto& o = r.program.info().optimus();
    std::printf("  %-48s tp%d pp%d m=%-2d est %.3f sim %.3f llm %.3f ms, δ %.3f, eff %.2f→%.2f, moves %d/%d, cuts %d/%d\n",
                var.name.c_str(), o.encoder_tp(), o.encoder_pp(), o.encoder_pipelines_per_llm_pipeline(),
                o.estimated_iteration_ns() / 1e6, r.end / 1e6, o.llm_only_iteration_ns() / 1e6,
                r.plan.schedule.delta_ns / 1e6, o.coarse_efficiency(), o.fine_efficiency(),
                r.plan.schedule.forward_moves, r.plan.schedule.backward_moves, r.plan.schedule.forward_cuts,
                r.plan.schedule.backward_cuts);
    check_invariants(s, r);
    // Ranks of one class are interchangeable: simulating every rank gives
    // the same iteration as one representative per class.
    const auto cost = cost_of(s);
    EXPECT_EQ(engine::Simulator(r.program, *cost, {.fold = false}).run().end_time.count(), r.end);
    EXPECT_GE(o.fine_efficiency(), o.coarse_efficiency());
    EXPECT_GE(r.end, o.llm_only_iteration_ns());
    // The same plan under every execution mechanism of the software's
    // defaults: the dependencies still hold (the estimate does not model
    // blocking p2p and the step's global syncs, docs/placements.md).
    auto full = s;
    full.spec.mutable_execution()->clear_pipeline_p2p();
    full.spec.mutable_execution()->clear_step_stats_sync();
    full.spec.mutable_execution()->clear_clip_grad();
    check_invariants(full, plan_and_simulate(full), false);
    forward_moves += r.plan.schedule.forward_moves;
    backward_moves += r.plan.schedule.backward_moves;
    forward_cuts += r.plan.schedule.forward_cuts;
    backward_cuts += r.plan.schedule.backward_cuts;
  }
  // The variants exercise encoder work in the LLM's steady-phase bubbles.
  EXPECT_GT(forward_moves, 0);
  EXPECT_GT(backward_moves, 0);
}

// Optimus's dependency-point deferral on an interleaved LLM of 4 stages:
// every deferral the LLM's schedule allows keeps every encoder ↔ LLM
// dependency in the simulated program (outputs arrive before the LLM consumes
// them, every gradient returns, every forward has its backward), moves the
// last microbatch's forward dependency point no earlier, and the planner's
// choice is the best of them.
TEST(Optimus, DependencyPointDeferralKeepsEveryDependency) {
  SmallMllm m;
  m.llm.schedule = scenario::INTERLEAVED_1F1B;
  m.llm.pp = 4;
  m.llm.layers = 8;
  m.llm.v = 2;
  m.llm.dp = 1;
  m.llm.global_batch = 16;  // 8 microbatches
  m.encoders[0].layers = 2;
  const auto s = make_mllm(m);
  const int32_t n = 8;
  int64_t best = std::numeric_limits<int64_t>::max(), megatron_last_f = 0;
  for (int32_t d = 0; d <= 6; ++d) {
    SCOPED_TRACE("deferral " + std::to_string(d));
    PlannerOptions options;
    options.fixed_deferral = d;
    const Outcome r = plan_and_simulate(s, options);
    EXPECT_EQ(r.plan.warmup_deferral, d);
    check_invariants(s, r);
    const int64_t last_f = r.plan.timeline.forward_start_ns[static_cast<size_t>(n - 1)];
    if (d == 0) megatron_last_f = last_f;
    EXPECT_GE(last_f, megatron_last_f) << "F of the last microbatch moved earlier";
    std::printf("  d=%d LLM alone %.3f ms, F_last %.3f ms, estimate %.3f ms, simulated %.3f ms, eff %.2f\n", d,
                r.plan.timeline.iteration_ns / 1e6, last_f / 1e6, r.plan.schedule.estimate_ns / 1e6, r.end / 1e6,
                r.plan.schedule.efficiency);
    EXPECT_LE(r.plan.schedule.estimate_ns, r.plan.search_estimate_ns);
    best = std::min(best, r.plan.search_estimate_ns);
  }
  const Outcome chosen = plan_and_simulate(s);
  EXPECT_EQ(chosen.plan.search_estimate_ns, best);
  EXPECT_EQ(chosen.plan.deferrals_evaluated, 6);
  EXPECT_EQ(chosen.program.info().optimus().warmup_deferral(), chosen.plan.warmup_deferral);
  PlannerOptions off;
  off.defer = false;
  EXPECT_GE(plan_and_simulate(s, off).plan.search_estimate_ns, chosen.plan.search_estimate_ns);
}

// The bubble profile splits the LLM-only compute stream's idle time: PRE into
// the exposed DP all-gather and PP warm-up, POST into PP cool-down and the
// exposed DP reduce-scatter, the steady bubbles into TP and PP other; summed,
// it is every blocked wait of the compute stream, averaged over stages.
TEST(Optimus, BubbleProfileAccountsForEveryIdleNanosecond) {
  SmallMllm m = [] {
    SmallMllm b;
    b.llm.global_batch = 32;
    b.llm.overlap_grad = false;
    b.llm.overlap_param = false;
    b.llm.sp = true;
    return b;
  }();
  const auto s = make_mllm(m);
  const Outcome r = plan_and_simulate(s);
  const BubbleProfile bp = bubble_profile(r.plan.timeline);
  int64_t idle = 0;
  for (const auto& st : r.plan.timeline.stages) {
    idle += st.pre_wait_ns + st.post_wait_ns;
    for (const auto& b : st.bubbles) idle += b.length();
    EXPECT_LE(st.pre_dp_ns, st.pre_wait_ns);
    EXPECT_LE(st.post_dp_ns, st.post_wait_ns);
  }
  const auto stages = static_cast<int64_t>(r.plan.timeline.stages.size());
  EXPECT_NEAR(static_cast<double>(bp.total_ns()), static_cast<double>(idle) / static_cast<double>(stages), 6.0);
  // Without DP overlap both DP collectives are exposed, and SP puts TP
  // collectives on the critical path.
  EXPECT_GT(bp.dp_all_gather_ns, 0);
  EXPECT_GT(bp.dp_reduce_scatter_ns, 0);
  EXPECT_GT(bp.tp_ns, 0);
  EXPECT_GT(bp.pp_warmup_ns, 0);
  const auto& p = r.program.info().optimus().bubble_profile();
  EXPECT_EQ(p.dp_all_gather_ns(), bp.dp_all_gather_ns);
  EXPECT_EQ(p.tp_ns(), bp.tp_ns);
}

SmallMllm base8() {
  SmallMllm m;
  m.llm.global_batch = 32;  // 8 microbatches per pipeline
  return m;
}

TEST(Optimus, ZeroEncoderWorkCostsAtMostOneNanosecondPerEncoderOp) {
  for (const auto& s : {make_mllm(base8()), with_layout(base8(), 1, 2, false)}) {
    const Outcome r = plan_and_simulate(s);
    ir::Program p = r.program;
    const int64_t encoder_ops = compiler::testing::make_encoder_work_free(p);
    ASSERT_GT(encoder_ops, 0);
    const auto cost = cost_of(s);
    const int64_t end = engine::Simulator(p, *cost, {.fold = true}).run().end_time.count();
    const int64_t llm = r.plan.timeline.iteration_ns;
    EXPECT_GE(end, llm);
    EXPECT_LE(end - llm, encoder_ops) << "LLM-only " << llm << " ns, with zero-cost encoder work " << end << " ns";
  }
}

TEST(Optimus, EncoderOpsAreMarkedAndTheLlmProgramIsUnchanged) {
  const auto s = make_mllm(base8());
  const auto cost = cost_of(s);
  const PlannerResult plan = plan_optimus(s, *cost, {});
  const ir::Program p = emit_optimus(s, plan);
  const Geometry& geo = plan.geo;
  ASSERT_EQ(p.classes_size(), geo.pp_llm * geo.slices());
  for (int32_t cls = 0; cls < p.classes_size(); ++cls) {
    // Removing every op with module > 0 gives back the LLM's class.
    const ir::RankClass& llm = plan.llm.classes(cls / geo.slices());
    const ir::RankClass& got = p.classes(cls);
    for (const auto& ls : llm.streams()) {
      const int32_t si = find_stream(got, ls.name());
      ASSERT_GE(si, 0);
      std::vector<std::string> a, b;
      for (const auto& op : ls.ops()) a.push_back(op.SerializeAsString());
      for (const auto& op : got.streams(si).ops())
        if (op.module() == 0) b.push_back(op.SerializeAsString());
      EXPECT_EQ(a, b) << "class " << got.name() << " stream " << ls.name();
    }
    // Encoder activations are all released again.
    int64_t delta = 0;
    for (const auto& st : got.streams())
      for (const auto& op : st.ops())
        if (op.module() > 0 && op.has_compute()) delta += op.compute().memory_delta_bytes();
    EXPECT_EQ(delta, 0) << got.name();
    // Every added stream carries encoder work only.
    for (const auto& st : got.streams()) {
      if (find_stream(llm, st.name()) >= 0) continue;
      for (const auto& op : st.ops()) EXPECT_GT(op.module(), 0) << st.name();
    }
  }
  const auto& info = p.info();
  EXPECT_EQ(info.placement(), scenario::OPTIMUS);
  ASSERT_EQ(info.modules_size(), 2);
  EXPECT_TRUE(info.modules(1).is_encoder());
  EXPECT_EQ(info.modules(1).dp(), geo.dp_enc());
  EXPECT_EQ(info.optimus().encoder_dp(), geo.dp_enc());
  EXPECT_EQ(info.optimus().microbatch_split_size(), geo.pipelines());
  EXPECT_GT(info.model_flops_per_iteration(), plan.llm.info().model_flops_per_iteration());
}

TEST(Optimus, EmittedModelStateMatchesThePaperMemoryModel) {
  // Encoder TP 1: no parameter is replicated inside an encoder replica, so
  // the encoder's bf16 weights + fp32 gradients averaged over the GPUs are
  // exactly the paper's k = 6 term k · DP_enc · Φ_enc / n_gpu, and its
  // optimizer state the distributed shard 12 · Φ_enc / n_gpu (up to rounding).
  const auto s = with_layout(base8(), 1, 2, false);
  const auto cost = cost_of(s);
  const PlannerResult plan = plan_optimus(s, *cost, {});
  const ir::Program p = emit_optimus(s, plan);
  double replicated = 0, optimizer = 0;
  for (const auto& rb : p.ranks()) {
    const auto& got = p.classes(rb.class_id()).memory();
    const auto& llm = plan.llm.classes(rb.coord().pp()).memory();
    replicated += static_cast<double>(got.weights_bytes() - llm.weights_bytes() + got.gradients_bytes() -
                                      llm.gradients_bytes());
    optimizer += static_cast<double>(got.optimizer_bytes() - llm.optimizer_bytes());
  }
  const int64_t n_gpu = p.ranks_size();
  const double phi_enc = static_cast<double>(model::encoder_parameters(s.spec, 0));
  EXPECT_DOUBLE_EQ(replicated / n_gpu, paper_model_memory_bytes(6, plan.geo.dp_enc(), phi_enc, 0, 0, n_gpu));
  EXPECT_NEAR(optimizer / n_gpu, 12 * phi_enc / n_gpu, 1.0);
  // And the planner's per-GPU peak is the most loaded class.
  EXPECT_EQ(plan.peak_memory, plan_peak_memory_bytes(plan.llm, plan.timeline, plan.work, plan.schedule.split));
}

SmallMllm big_encoder() {
  SmallMllm m = base8();
  m.encoders[0].hidden = 1024;  // a big encoder: replicating it costs memory
  m.encoders[0].ffn = 4096;
  m.encoders[0].heads = 8;
  return m;
}

void set_capacity(scenario::LoadedScenario& s, int64_t bytes) {
  s.spec.mutable_cluster()->mutable_gpu()->set_hbm_capacity_gib(static_cast<double>(bytes) / 1073741824.0);
}

// Per plan, the encoder's recompute is the first rung of its ladder, in order
// of its recompute time, at which the even split fits: brute force over the
// rungs, each costed on its own work.
TEST(Optimus, EncoderRecomputeIsTheCheapestRungThatFits) {
  auto s = make_mllm(big_encoder());
  const auto cost = cost_of(s);
  const PlannerResult all = plan_optimus(s, *cost, {});
  int32_t checked = 0, raised = 0;
  for (const Geometry& g : enumerate_geometries(2, 2, 2, 4)) {
    struct Rung {
      compiler::ModuleRecompute r;
      int64_t cost = 0, memory = 0;
    };
    std::vector<Rung> rungs;
    const int64_t layers = (4 + g.pp_enc - 1) / g.pp_enc;
    for (const auto& r : recompute_ladder(layers)) {
      const EncoderWork w = build_encoder_work(s.spec, g, false, r.mode, all.llm, *cost, r.num_layers);
      Rung x{r, 0, plan_peak_memory_bytes(all.llm, all.timeline, w, even_split(8, g.pipelines())).count()};
      for (const StageWork& st : w.stages) x.cost += st.recompute_ns;
      rungs.push_back(x);
    }
    ASSERT_LT(rungs.back().memory, rungs.front().memory);
    std::stable_sort(rungs.begin() + 1, rungs.end(), [](const Rung& a, const Rung& b) { return a.cost < b.cost; });
    std::set<int64_t> capacities;
    for (const Rung& r : rungs) capacities.insert(r.memory);
    for (int64_t capacity : capacities) {
      set_capacity(s, capacity);
      const auto want = std::find_if(rungs.begin(), rungs.end(), [&](const Rung& r) { return r.memory <= capacity; });
      const EncoderFit got = fit_encoder_recompute(s.spec, g, false, {scenario::RECOMPUTE_NONE, 0}, all.llm,
                                                   all.timeline, *cost);
      EXPECT_TRUE(got.fits);
      EXPECT_EQ(got.recompute, want->r) << "tp " << g.tp_enc << " pp " << g.pp_enc << " capacity " << capacity;
      EXPECT_EQ(got.memory.count(), want->memory);
      ++checked;
      raised += want != rungs.begin() ? 1 : 0;
    }
  }
  EXPECT_GE(raised, 6);
  EXPECT_GT(checked, raised);
}

TEST(Optimus, PlannerPrunesWhatFitsAtNoRecomputeAndFallsBackToTheSmallestPlan) {
  auto s = make_mllm(big_encoder());
  const auto cost = cost_of(s);
  const PlannerResult all = plan_optimus(s, *cost, {.keep_candidates = true});
  ASSERT_EQ(all.plans_pruned_by_memory, 0);
  EXPECT_TRUE(all.fits);
  // Each plan's least memory: its encoder at full recompute of every layer.
  std::vector<int64_t> memory;
  for (const Geometry& g : enumerate_geometries(2, 2, 2, 4)) {
    const EncoderWork w = build_encoder_work(s.spec, g, false, scenario::RECOMPUTE_FULL, all.llm, *cost);
    memory.push_back(plan_peak_memory_bytes(all.llm, all.timeline, w, even_split(8, g.pipelines())).count());
  }
  const auto [lo, hi] = std::minmax_element(memory.begin(), memory.end());
  ASSERT_LT(*lo, *hi);
  // Capacity between the smallest and the largest plan: some are pruned, the
  // others raise their recompute as far as they need and fit.
  set_capacity(s, (*lo + *hi) / 2);
  const PlannerResult pruned = plan_optimus(s, *cost, {});
  EXPECT_GT(pruned.plans_pruned_by_memory, 0);
  EXPECT_EQ(pruned.plans_pruned_by_memory + pruned.plans_evaluated, static_cast<int32_t>(memory.size()));
  EXPECT_LE(pruned.peak_memory.count(), (*lo + *hi) / 2);
  EXPECT_TRUE(pruned.fits);
  EXPECT_EQ(pruned.llm_recompute, (compiler::ModuleRecompute{scenario::RECOMPUTE_NONE, 0}));
  // Nothing fits, not even with the LLM at full recompute: the least-memory
  // plan at the LLM's top rung is kept (its memory report shows the
  // overflow) instead of refusing.
  set_capacity(s, *lo / 4);
  const PlannerResult none = plan_optimus(s, *cost, {});
  EXPECT_FALSE(none.fits);
  EXPECT_EQ(none.plans_pruned_by_memory, static_cast<int32_t>(memory.size()));
  EXPECT_EQ(none.plans_evaluated, 1);
  EXPECT_EQ(none.llm_recompute, (compiler::ModuleRecompute{scenario::RECOMPUTE_FULL, 0}));
  EXPECT_EQ(none.encoder_recompute, (compiler::ModuleRecompute{scenario::RECOMPUTE_FULL, 0}));
  EXPECT_LT(none.peak_memory.count(), *lo);  // the LLM's full recompute lowers it further
}

// When no encoder recompute fits a plan, the LLM's rises.
TEST(Optimus, PlannerRaisesTheLlmRecomputeWhenNoEncoderRecomputeFits) {
  auto s = make_mllm(big_encoder());
  const auto cost = cost_of(s);
  const PlannerResult all = plan_optimus(s, *cost, {});
  // The least any plan needs with the LLM as asked, and with the LLM at full
  // recompute.
  auto least = [&](const ir::Program& llm, const LlmTimeline& t) {
    int64_t m = std::numeric_limits<int64_t>::max();
    for (const Geometry& g : enumerate_geometries(2, 2, 2, 4)) {
      const EncoderWork w = build_encoder_work(s.spec, g, false, scenario::RECOMPUTE_FULL, llm, *cost);
      m = std::min(m, plan_peak_memory_bytes(llm, t, w, even_split(8, g.pipelines())).count());
    }
    return m;
  };
  scenario::LoadedScenario full = s;
  full.spec.mutable_parallel()->set_recompute(scenario::RECOMPUTE_FULL);
  const PlannerResult with_full = plan_optimus(full, *cost, {});
  const int64_t asked = least(all.llm, all.timeline), raised = least(with_full.llm, with_full.timeline);
  ASSERT_LT(raised, asked);
  set_capacity(s, (asked + raised) / 2);
  const PlannerResult plan = plan_optimus(s, *cost, {});
  EXPECT_TRUE(plan.fits);
  EXPECT_NE(plan.llm_recompute, (compiler::ModuleRecompute{scenario::RECOMPUTE_NONE, 0}));
  EXPECT_LE(plan.peak_memory.count(), (asked + raised) / 2);
  EXPECT_EQ(plan.llm.info().recompute(), plan.llm_recompute.mode);
  const ir::Program p = emit_optimus(s, plan);
  EXPECT_EQ(p.info().modules(0).recompute(), plan.llm_recompute.mode);
  EXPECT_EQ(p.info().modules(1).recompute(), plan.encoder_recompute.mode);
  EXPECT_EQ(p.info().modules(1).recompute_num_layers(), plan.encoder_recompute.num_layers);
}

// The planner's estimate bounds the emitted program's static peak (its
// memory overheads applied as compile does), whatever the schedule.
TEST(Optimus, EstimateBoundsTheEmittedPeak) {
  for (bool coarse : {false, true}) {
    for (auto r : {scenario::RECOMPUTE_NONE, scenario::RECOMPUTE_SELECTIVE, scenario::RECOMPUTE_FULL}) {
      SmallMllm m = big_encoder();
      m.llm.recompute = r;
      m.coarse_only = coarse;
      auto s = make_mllm(m);
      auto* mo = s.spec.mutable_cluster()->mutable_memory_overheads();
      mo->set_cuda_context_gib(0.5);
      mo->set_nccl_communicator_mib(656);
      mo->set_allocator_fragmentation(0.15);
      const auto cost = cost_of(s);
      const PlannerResult plan = plan_optimus(s, *cost, {.coarse_only = coarse});
      ir::Program p = emit_optimus(s, plan);
      compiler::apply_memory_overheads(p);
      const cost::Feasibility f = cost::program_feasibility(p);
      EXPECT_LE(f.worst.peak, plan.peak_memory) << "coarse " << coarse << " recompute " << r;
      EXPECT_GT(f.worst.peak, Bytes(plan.peak_memory.count() * 9 / 10)) << "coarse " << coarse << " recompute " << r;
    }
  }
}

// Compositions of n into m parts ≥ 1, independently of optimus_plan.cpp.
void all_compositions(int n, int m, std::vector<int32_t>& cur, std::vector<std::vector<int32_t>>& out) {
  if (static_cast<int>(cur.size()) == m - 1) {
    if (n >= 1) {
      cur.push_back(n);
      out.push_back(cur);
      cur.pop_back();
    }
    return;
  }
  for (int v = 1; v <= n; ++v) {
    cur.push_back(v);
    all_compositions(n - v, m, cur, out);
    cur.pop_back();
  }
}

TEST(Optimus, PlannerPicksTheMinimumOfABruteForceSearch) {
  const auto s = make_mllm(base8());
  const auto cost = cost_of(s);
  const PlannerResult plan = plan_optimus(s, *cost, {.keep_candidates = true});
  int64_t best = std::numeric_limits<int64_t>::max();
  int64_t count = 0;
  Geometry best_geo;
  std::vector<int32_t> best_split;
  for (const Geometry& g : enumerate_geometries(2, 2, 2, 4)) {
    const EncoderWork w = build_encoder_work(s.spec, g, false, scenario::RECOMPUTE_NONE, plan.llm, *cost);
    BubbleScheduler sch(make_scheduler_input(plan.timeline, w, plan.llm, *cost));
    std::vector<int32_t> cur;
    std::vector<std::vector<int32_t>> splits;
    all_compositions(8, g.pipelines(), cur, splits);
    for (const auto& split : splits) {
      const int64_t e = sch.evaluate(split, false);
      ++count;
      if (e < best) {
        best = e;
        best_geo = g;
        best_split = split;
      }
    }
  }
  EXPECT_EQ(count, 35 + 7 + 7 + 1);  // m = 4, 2, 2, 1
  EXPECT_EQ(plan.splits_evaluated, count);
  EXPECT_EQ(static_cast<int64_t>(plan.candidates.size()), count);
  EXPECT_EQ(plan.search_estimate_ns, best);
  EXPECT_LE(plan.schedule.estimate_ns, plan.search_estimate_ns);  // kernel-level cuts only shorten it
  EXPECT_EQ(plan.geo.tp_enc, best_geo.tp_enc);
  EXPECT_EQ(plan.geo.pp_enc, best_geo.pp_enc);
  EXPECT_EQ(plan.schedule.split, best_split);
  for (const auto& c : plan.candidates) EXPECT_GE(c.estimate_ns, plan.search_estimate_ns);
  // Fine moves never lose to the coarse schedule of the same split.
  EXPECT_LE(plan.schedule.estimate_ns, plan.coarse.estimate_ns);
}

std::string serialized(const ir::Program& p) {
  std::string out;
  google::protobuf::io::StringOutputStream sos(&out);
  google::protobuf::io::CodedOutputStream cos(&sos);
  cos.SetSerializationDeterministic(true);
  p.SerializeToCodedStream(&cos);
  return out;
}

TEST(Optimus, CompilationIsDeterministic) {
  SmallMllm m = base8();
  m.llm.schedule = scenario::INTERLEAVED_1F1B;
  m.llm.v = 2;
  const auto s = make_mllm(m);
  const auto cost = cost_of(s);
  const std::string a = serialized(compile_optimus(s, *cost));
  const std::string b = serialized(compile_optimus(s, *cost));
  EXPECT_EQ(a, b);
  EXPECT_GT(a.size(), 1000u);
}

std::string field_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.where().field + ": " + e.problem();
  }
  return "(no error)";
}

TEST(Optimus, UnsupportedInputsAreClearErrors) {
  const auto cost_s = make_mllm(base8());
  const auto cost = cost_of(cost_s);
  {
    SmallMllm m = base8();
    m.llm.cp = 2;
    m.llm.dp = 1;
    m.llm.global_batch = 16;
    const auto s = make_mllm(m);
    EXPECT_EQ(field_of([&] { compile_optimus(s, *cost); }).rfind("parallel.cp: ", 0), 0u);
  }
  {
    auto s = with_layout(base8(), 1, 2, false);
    s.spec.mutable_model()->mutable_encoders(0)->mutable_layout()->set_tp(3);
    EXPECT_EQ(field_of([&] { compile_optimus(s, *cost); }).rfind("model.encoders[0].layout.tp: ", 0), 0u);
  }
  {
    auto s = with_layout(base8(), 1, 2, false);
    s.spec.mutable_model()->mutable_encoders(0)->mutable_layout()->set_dp(3);
    EXPECT_EQ(field_of([&] { compile_optimus(s, *cost); }).rfind("model.encoders[0].layout.dp: ", 0), 0u);
  }
  {
    SmallMllm m = base8();
    m.encoders.push_back(SmallEncoder{});
    auto s = make_mllm(m);
    s.spec.mutable_model()->mutable_encoders(0)->mutable_layout()->set_tp(1);
    s.spec.mutable_model()->mutable_encoders(0)->mutable_layout()->set_pp(1);
    s.spec.mutable_model()->mutable_encoders(0)->mutable_layout()->set_dp(16);
    EXPECT_EQ(field_of([&] { compile_optimus(s, *cost); }).rfind("model.encoders[1]: ", 0), 0u);
  }
  {
    // Another placement's layouts are not an Optimus plan: `compare` plans.
    auto s = with_layout(base8(), 1, 2, false);
    s.spec.mutable_model()->mutable_encoders(0)->mutable_layout()->set_first_rank(8);
    s.spec.mutable_placement()->set_kind(scenario::HETEROGENEOUS);
    EXPECT_NO_THROW(compile_optimus(s, *cost));
  }
}

// The paper's largest strong-scaling point: ViT-22B + GPT-175B on 3,072
// GPUs (TP 8, PP 8 × 12 chunks, DP 48, 16 microbatches of 2). The planner
// simulates the LLM once and must stay interactive (≤ 60 s on the 2-core
// development VM; it takes well under a second).
// The shipped 3,072-GPU case under the execution mechanisms the scheduler's
// estimate models (overlapped pipeline p2p, no host-read step statistics or
// gradient clipping; 1,536 and 2,048 GPUs, the same shapes, run with the full
// semantics below): the estimate bounds the simulation, the LLM's kernels
// end no later than LLM-only + δ, and kernel-level cuts (the tails of encoder
// forwards split into the LLM's TP bubbles) are among the moves.
TEST(Optimus, Vit22bGpt175bOn3072GpusPlansQuicklyAndKeepsItsDependencies) {
  auto s =
      scenario::load_scenario(std::string(LACUNA_SOURCE_DIR) + "/scenarios/mllm/optimus-vit22b-gpt175b-3072.pbtxt");
  s.spec.mutable_execution()->set_pipeline_p2p(scenario::P2P_OVERLAPPED);
  s.spec.mutable_execution()->set_step_stats_sync(false);
  s.spec.mutable_execution()->set_clip_grad(0);
  const auto cost = cost_of(s);
  const auto t0 = std::chrono::steady_clock::now();
  const PlannerResult plan = plan_optimus(s, *cost, {});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(seconds, 60.0);
  Outcome r;
  r.plan = plan;
  r.program = emit_optimus(s, plan);
  engine::Simulator sim(r.program, *cost, {.fold = true});
  sim.add_observer(&r.trace);
  r.end = sim.run().end_time.count();
  const auto& o = r.program.info().optimus();
  std::printf("  planner %.2f s: %d plans scheduled, %d pruned by memory, %lld splits\n", seconds,
              plan.plans_evaluated, plan.plans_pruned_by_memory, static_cast<long long>(plan.splits_evaluated));
  std::printf("  encoder tp%d pp%d dp%d, m = %d; LLM-only %.1f ms, estimate %.1f ms, simulated %.1f ms, "
              "δ %.1f ms, efficiency coarse %.3f fine %.3f, moves %d/%d\n",
              o.encoder_tp(), o.encoder_pp(), o.encoder_dp(), o.encoder_pipelines_per_llm_pipeline(),
              o.llm_only_iteration_ns() / 1e6, o.estimated_iteration_ns() / 1e6, r.end / 1e6,
              plan.schedule.delta_ns / 1e6, o.coarse_efficiency(), o.fine_efficiency(), plan.schedule.forward_moves,
              plan.schedule.backward_moves);
  std::printf("  kernel-level cuts %d, deferral %d of %d simulated, search estimate %.1f ms\n",
              plan.schedule.forward_cuts, plan.warmup_deferral, plan.deferrals_evaluated, plan.search_estimate_ns / 1e6);
  EXPECT_EQ(r.program.ranks_size(), 3072);
  EXPECT_GT(plan.schedule.forward_cuts, 0);
  EXPECT_LT(plan.schedule.estimate_ns, plan.search_estimate_ns);
  check_invariants(s, r);
}

// Every Optimus scenario shipped in scenarios/mllm plans, simulates and
// keeps its dependencies.
TEST(Optimus, ShippedScenariosKeepTheirDependencies) {
  int found = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(LACUNA_SOURCE_DIR) + "/scenarios/mllm")) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("optimus-", 0) != 0 || entry.path().extension() != ".pbtxt") continue;
    if (name.find("3072") != std::string::npos) continue;  // its own test above
#if defined(LACUNA_SANITIZED)
    // The GPT-175B ones (512 to 2,048 GPUs) took 239 s of the sanitizer
    // run; the release build plans and checks them all, the sanitizer build
    // the smaller models (Llama-70B, GPT-11B), which run the same planner.
    if (name.find("175b") != std::string::npos) continue;
#endif
    SCOPED_TRACE(name);
    ++found;
    const auto s = scenario::load_scenario(entry.path().string());
    const Outcome r = plan_and_simulate(s);
    const auto& o = r.program.info().optimus();
    const auto& info = r.program.info();
    double encoder_flops = 0;
    for (int i = 1; i < info.modules_size(); ++i) encoder_flops += info.modules(i).model_flops_per_iteration();
    std::printf("  %-50s enc/llm FLOPs %.2f, tp%d pp%d m=%-2d LLM %.1f est %.1f sim %.1f ms, eff %.3f→%.3f, "
                "moves %d/%d\n",
                name.c_str(), encoder_flops / info.modules(0).model_flops_per_iteration(), o.encoder_tp(),
                o.encoder_pp(), o.encoder_pipelines_per_llm_pipeline(), o.llm_only_iteration_ns() / 1e6,
                o.estimated_iteration_ns() / 1e6, r.end / 1e6, o.coarse_efficiency(), o.fine_efficiency(),
                r.plan.schedule.forward_moves, r.plan.schedule.backward_moves);
    check_invariants(s, r, false);  // full semantics: dependencies only (above)
  }
  EXPECT_GT(found, 0);
}

}  // namespace
}  // namespace lacuna::placement::optimus
