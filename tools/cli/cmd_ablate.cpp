// `lacuna ablate SCENARIO`: the scenario as written, then once with each
// execution switch (and hardware-model mechanism) flipped, side by side:
// iteration time, MFU, the change against the scenario, and the bubble
// categories that moved most (docs/results.md#ablation). Each variant is a
// scenario of its own, validated like a file: a combination Megatron-LM
// rejects is reported as such instead of simulated.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/core/atomic_file.h"
#include "sim/engine/simulator.h"
#include "sim/placement/compile.h"
#include "sim/report/bubble_accounting.h"
#include "sim/report/summary.h"
#include "sim/run/lazy_cost_model.h"
#include "sim/run/single_run.h"
#include "sim/scenario/execution.h"
#include "tools/cli/commands.h"
#include "tools/cli/network_option.h"
#include "tools/cli/output_checks.h"

namespace lacuna::cli {
namespace {

struct AblateOptions {
  std::string scenario;
  NetworkMode network = NetworkMode::kFlow;
  bool full = false;
  int jobs = 0;
  std::string json;
};

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

struct Outcome {
  std::string name, flag;
  bool applies = true;
  std::string problem;  // the variant is invalid: why
  double seconds = 0;
  double mfu = 0;
  std::array<int64_t, report::kNumBubbles> bubbles_ns{};  // medians over ranks
  bool multimodal = false;
  bool moe = false;  // the MoE bubble categories (docs/moe.md#load-imbalance)
};

Outcome run_one(const scenario::LoadedScenario& loaded, NetworkMode mode, bool fold) {
  Outcome out;
  const ir::Program program = placement::compile(loaded);
  const run::LazyAnalyticCostModel cost(program.cluster(), program.info().precision());
  const report::Summary summary = run::simulate_and_summarize(program, cost, mode, fold).summary;
  out.seconds = summary.iteration_time.seconds();
  out.mfu = summary.mfu;
  for (int b = 0; b < report::kNumBubbles; ++b) out.bubbles_ns[static_cast<size_t>(b)] = summary.bubbles[static_cast<size_t>(b)].median;
  out.multimodal = summary.multimodal();
  out.moe = summary.moe();
  return out;
}

// The two bubble categories whose median moved most, with their change.
std::string moved(const Outcome& base, const Outcome& v) {
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

int run_ablate(const AblateOptions& o) {
  check_outputs({{"--json", o.json}}, {{"SCENARIO", o.scenario}});
  const scenario::LoadedScenario base = scenario::load_scenario(o.scenario);
  const std::vector<Variant> vs = variants(base.spec);
  const bool fold = !o.full;
  std::vector<Outcome> outcomes(vs.size() + 1);
  std::vector<std::exception_ptr> errors(outcomes.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < outcomes.size();) {
      try {
        if (i == 0) {
          outcomes[0] = run_one(base, o.network, fold);
          outcomes[0].name = "as written";
          continue;
        }
        const Variant& v = vs[i - 1];
        scenario::LoadedScenario changed = base;
        Outcome r;
        r.name = v.name;
        r.flag = v.flag;
        if (!v.apply(changed.spec)) {
          r.applies = false;
          outcomes[i] = r;
          continue;
        }
        try {
          scenario::validate_scenario(changed.spec, changed.locations);
        } catch (const Error& e) {
          r.problem = e.problem();
          outcomes[i] = r;
          continue;
        }
        Outcome run = run_one(changed, o.network, fold);
        run.name = r.name;
        run.flag = r.flag;
        outcomes[i] = run;
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  const int threads = std::max(1, std::min<int>(o.jobs > 0 ? o.jobs : static_cast<int>(std::thread::hardware_concurrency()),
                                               static_cast<int>(outcomes.size())));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);

  const Outcome& ref = outcomes[0];
  fmt::print("Ablation of {} ({}, {}), one switch flipped per row\n\n", base.spec.name(),
             o.network == NetworkMode::kFlow ? "flow network" : "analytic network", fold ? "folded" : "every rank");
  fmt::print("| variant | flag | iteration (s) | Δ time | MFU | bubbles that moved (median per rank) |\n");
  fmt::print("|---|---|---|---|---|---|\n");
  nlohmann::json rows = nlohmann::json::array();
  for (const Outcome& r : outcomes) {
    nlohmann::json j{{"variant", r.name}, {"flag", r.flag}};
    if (!r.applies) {
      fmt::print("| {} | {} | — | — | — | not applicable to this scenario |\n", r.name, r.flag);
      j["applicable"] = false;
    } else if (!r.problem.empty()) {
      fmt::print("| {} | {} | — | — | — | rejected: {} |\n", r.name, r.flag, r.problem);
      j["rejected"] = r.problem;
    } else {
      const double delta = ref.seconds > 0 ? (r.seconds - ref.seconds) / ref.seconds : 0;
      fmt::print("| {} | {} | {:.3f} | {} | {:.1f} % | {} |\n", r.name, r.flag.empty() ? "—" : r.flag, r.seconds,
                 &r == &ref ? std::string("—") : fmt::format("{:+.1f} %", std::round(delta * 1000) / 10),
                 r.mfu * 100, &r == &ref ? std::string("—") : moved(ref, r));
      j["iteration_s"] = r.seconds;
      j["mfu"] = r.mfu;
      j["delta"] = delta;
      nlohmann::json b;
      for (int k = 0; k < report::kNumBubbles; ++k)
        if (report::bubble_shown(static_cast<report::Bubble>(k), r.multimodal, r.moe))
          b[std::string(report::bubble_key(static_cast<report::Bubble>(k)))] = r.bubbles_ns[static_cast<size_t>(k)];
      j["bubble_median_ns"] = b;
    }
    rows.push_back(std::move(j));
  }
  if (!o.json.empty()) {
    nlohmann::json top{{"scenario", base.spec.name()}, {"folded", fold}, {"rows", std::move(rows)}};
    write_file_atomically(o.json, top.dump(2) + "\n");
    fmt::print("\nwrote {}\n", o.json);
  }
  return 0;
}

}  // namespace

void add_ablate_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<AblateOptions>();
  CLI::App* sub = app.add_subcommand(
      "ablate", "The scenario with each execution switch flipped: iteration time, MFU and the bubbles that moved");
  sub->add_option("SCENARIO", o->scenario, "scenario (.pbtxt, .json)")->required();
  add_network_option(sub, o->network);
  sub->add_flag("--full", o->full, "simulate every rank (default: one representative per class, as validate)");
  sub->add_option("-j,--jobs", o->jobs, "variants simulated at once (default: one per hardware thread)")
      ->check(CLI::Range(0, 1024));
  sub->add_option("--json", o->json, "also write every row as JSON")->check(output_file());
  sub->callback([o, &action] { action = [o] { return run_ablate(*o); }; });
}

}  // namespace lacuna::cli
