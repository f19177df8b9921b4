#include "sim/run/ablation.h"

#include <algorithm>
#include <cstdlib>
#include <functional>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/core/parallel_map.h"
#include "sim/placement/compile.h"
#include "sim/report/analyses/summary.h"
#include "sim/run/lazy_cost_model.h"
#include "sim/run/single_run.h"
#include "sim/scenario/execution.h"

namespace lacuna::run {
namespace {

// One variant: what it changes, and the change applied to a copy of the
// scenario. `applies` false: the switch does not exist for this scenario
// (e.g. pipeline p2p without pipeline parallelism).
struct Variant {
  std::string name;
  std::string flag;  // the Megatron-LM flag or lacuna field it toggles
  std::function<bool(scenario::Scenario&)> apply;
};

std::string on_off(bool v) { return v ? "on" : "off"; }

std::vector<Variant> variants(const scenario::Scenario& base) {
  const scenario::Execution x = scenario::resolve_execution(base, scenario::SourceMap{});
  std::vector<Variant> out;
  auto flip_bool = [&](std::string name, std::string flag, bool current,
                       std::function<void(scenario::Execution&, bool)> set) {
    out.push_back({name + " " + on_off(!current), std::move(flag), [current, set](scenario::Scenario& s) {
                     set(*s.mutable_execution(), !current);
                     return true;
                   }});
  };
  const bool blocking = x.pipeline_p2p() == scenario::P2P_BLOCKING;
  out.push_back({std::string("pipeline p2p ") + (blocking ? "overlapped" : "blocking"),
                 "--overlap-p2p-communication", [blocking](scenario::Scenario& s) {
                   if (s.parallel().pp() < 2) return false;
                   s.mutable_execution()->set_pipeline_p2p(blocking ? scenario::P2P_OVERLAPPED : scenario::P2P_BLOCKING);
                   return true;
                 }});
  const auto& par = base.parallel();
  const bool dp_overlap = par.overlap_grad_reduce();
  out.push_back({std::string("DP overlap ") + on_off(!dp_overlap), "--overlap-grad-reduce / --overlap-param-gather",
                 [dp_overlap](scenario::Scenario& s) {
                   auto* p = s.mutable_parallel();
                   if (p->dp() * p->cp() < 2) return false;
                   p->set_overlap_grad_reduce(!dp_overlap);
                   p->set_overlap_param_gather(!dp_overlap && p->distributed_optimizer());
                   return true;
                 }});
  flip_bool("TP comm overlap", "--tp-comm-overlap", x.tp_comm_overlap(),
            [](scenario::Execution& e, bool v) { e.set_tp_comm_overlap(v); });
  flip_bool("async TP grad reduce", "--async-tensor-model-parallel-allreduce", x.tp_async_grad_reduce(),
            [](scenario::Execution& e, bool v) { e.set_tp_async_grad_reduce(v); });
  flip_bool("grad-accumulation fusion", "--gradient-accumulation-fusion", x.gradient_accumulation_fusion(),
            [](scenario::Execution& e, bool v) { e.set_gradient_accumulation_fusion(v); });
  const bool fused = x.bias_gelu_fusion() && x.bias_dropout_fusion() && x.masked_softmax_fusion() && x.fused_layer_norm();
  flip_bool("fused kernels", "--no-bias-gelu/-dropout/-masked-softmax-fusion, fused LayerNorm", fused,
            [](scenario::Execution& e, bool v) {
              e.set_bias_gelu_fusion(v);
              e.set_bias_dropout_fusion(v);
              e.set_masked_softmax_fusion(v);
              e.set_fused_layer_norm(v);
            });
  flip_bool("timer syncs", "timers with torch.cuda.synchronize()", x.timer_sync(),
            [](scenario::Execution& e, bool v) { e.set_timer_sync(v); });
  flip_bool("NaN checks", "--check-for-nan-in-loss-and-grad", x.nan_check(),
            [](scenario::Execution& e, bool v) { e.set_nan_check(v); });
  flip_bool("step statistics", "step statistics all-reduces", x.step_stats_sync(),
            [](scenario::Execution& e, bool v) { e.set_step_stats_sync(v); });
  const bool clip = x.clip_grad() > 0;
  out.push_back({std::string("gradient clipping ") + on_off(!clip), "--clip-grad",
                 [clip](scenario::Scenario& s) {
                   s.mutable_execution()->set_clip_grad(clip ? 0.0 : 1.0);
                   return true;
                 }});
  const bool broadcast = x.batch_broadcast() != scenario::BROADCAST_NONE;
  out.push_back({std::string("batch broadcast ") + on_off(!broadcast), "data loading over TP",
                 [broadcast](scenario::Scenario& s) {
                   s.mutable_execution()->set_batch_broadcast(broadcast ? scenario::BROADCAST_NONE
                                                                        : scenario::BROADCAST_TENSORS_WITH_MASK);
                   return true;
                 }});
  const auto& host = base.cluster().host();
  const bool has_host = host.kernel_launch_us() > 0 || host.collective_launch_us() > 0 ||
                        host.microbatch_overhead_us() > 0 || host.iteration_overhead_us() > 0;
  out.push_back({std::string("host overheads ") + (has_host ? "off" : "(none to remove)"), "cluster.host",
                 [has_host](scenario::Scenario& s) {
                   if (!has_host) return false;
                   auto* h = s.mutable_cluster()->mutable_host();
                   h->set_kernel_launch_us(0);
                   h->set_collective_launch_us(0);
                   h->set_microbatch_overhead_us(0);
                   h->set_iteration_overhead_us(0);
                   return true;
                 }});
  const bool flat = base.cluster().gpu().shape_model().flat();
  out.push_back({std::string("per-shape kernel efficiency ") + on_off(flat), "cluster.gpu.shape_model.flat",
                 [flat](scenario::Scenario& s) {
                   s.mutable_cluster()->mutable_gpu()->mutable_shape_model()->set_flat(!flat);
                   return true;
                 }});
  return out;
}

AblationOutcome run_one(const scenario::LoadedScenario& loaded, NetworkMode mode, bool fold) {
  AblationOutcome out;
  const ir::Program program = placement::compile(loaded);
  const LazyAnalyticCostModel cost(program.cluster(), program.info().precision());
  const report::Summary summary = simulate_and_summarize(program, cost, mode, fold).summary;
  out.seconds = summary.iteration_time.seconds();
  out.mfu = summary.mfu;
  for (int b = 0; b < report::kNumBubbles; ++b) out.bubbles_ns[static_cast<size_t>(b)] = summary.bubbles[static_cast<size_t>(b)].median;
  out.multimodal = summary.multimodal();
  out.moe = summary.moe();
  return out;
}

}  // namespace

std::vector<AblationOutcome> run_ablation(const scenario::LoadedScenario& base, NetworkMode mode, bool fold,
                                          int jobs) {
  const std::vector<Variant> vs = variants(base.spec);
  return parallel_map(vs.size() + 1, resolve_jobs(jobs), [&](size_t i) {
    if (i == 0) {
      AblationOutcome out = run_one(base, mode, fold);
      out.name = "as written";
      return out;
    }
    const Variant& v = vs[i - 1];
    scenario::LoadedScenario changed = base;
    AblationOutcome r;
    r.name = v.name;
    r.flag = v.flag;
    if (!v.apply(changed.spec)) {
      r.applies = false;
      return r;
    }
    try {
      scenario::validate_scenario(changed.spec, changed.locations);
    } catch (const Error& e) {
      r.problem = e.problem();
      return r;
    }
    AblationOutcome run = run_one(changed, mode, fold);
    run.name = r.name;
    run.flag = r.flag;
    return run;
  });
}

std::string moved_bubbles(const AblationOutcome& base, const AblationOutcome& v) {
  std::vector<std::pair<int64_t, int>> deltas;
  for (int b = 0; b < report::kNumBubbles; ++b) {
    if (!report::bubble_shown(static_cast<report::Bubble>(b), base.multimodal, base.moe)) continue;
    deltas.emplace_back(v.bubbles_ns[static_cast<size_t>(b)] - base.bubbles_ns[static_cast<size_t>(b)], b);
  }
  std::stable_sort(deltas.begin(), deltas.end(),
                   [](const auto& a, const auto& b) { return std::llabs(a.first) > std::llabs(b.first); });
  std::string out;
  for (size_t i = 0; i < std::min<size_t>(2, deltas.size()); ++i) {
    if (std::llabs(deltas[i].first) < 50'000) break;  // under 0.05 ms: noise-level, not listed
    out += fmt::format("{}{} {:+.1f} ms", out.empty() ? "" : ", ",
                       report::bubble_key(static_cast<report::Bubble>(deltas[i].second)), deltas[i].first / 1e6);
  }
  return out.empty() ? "—" : out;
}

}  // namespace lacuna::run
