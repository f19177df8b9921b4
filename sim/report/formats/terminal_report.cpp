#include "sim/report/formats/terminal_report.h"

#include <algorithm>
#include <tuple>

#include <fmt/format.h>

#include "sim/report/formats/critical_path_report.h"
#include "sim/report/formats/format.h"
#include "sim/report/formats/names.h"
#include "sim/report/formats/network_report.h"
#include "sim/report/formats/optimus_text.h"

namespace lacuna::report {

namespace {

constexpr int kTerminalLabel = 24;

void row(std::string& out, std::string_view label, const std::string& value) {
  out += fmt::format("  {:<{}} {}\n", label, kTerminalLabel, value);
}

std::string plan_text(const ir::ProgramInfo& i) {
  std::string s = fmt::format("TP {} · CP {} · PP {} · DP {}", i.tp(), i.cp(), i.pp(), i.dp());
  if (i.virtual_stages() > 1) s += fmt::format(" · v {}", i.virtual_stages());
  return s;
}

double frac_of_total(int64_t ns, TimeNs total) {
  return total.count() > 0 ? static_cast<double>(ns) / static_cast<double>(total.count()) : 0.0;
}


// 1.316e9 → "1.316 G" (a count with an SI prefix, no unit).
std::string count_si(double v) {
  std::string t = format_si(v, "");
  while (!t.empty() && t.back() == ' ') t.pop_back();
  return t;
}

// "none", "selective", "full", "full (first 2 layers of each chunk)".
std::string recompute_text(scenario::Recompute r, int64_t num_layers) {
  std::string t(recompute_name(r));
  if (r == scenario::RECOMPUTE_FULL && num_layers > 0)
    t += fmt::format(" (first {} layer{} of each chunk)", num_layers, num_layers == 1 ? "" : "s");
  return t;
}

std::string module_layout(const ir::ModuleInfo& m) {
  std::string s = fmt::format("TP {} · CP {} · PP {} · DP {}", m.tp(), m.cp(), m.pp(), m.dp());
  if (m.virtual_stages() > 1) s += fmt::format(" · v {}", m.virtual_stages());
  return s;
}

std::string rank_range(int32_t first, int32_t count) {
  if (count <= 1) return fmt::format("{} (1)", first);
  return fmt::format("{}–{} ({})", first, first + count - 1, count);
}

// The placement, one line per module and (Optimus) what the planner decided.
void multimodal_block(std::string& out, const Summary& s) {
  const ir::ProgramInfo& i = s.info;
  row(out, "placement", std::string(placement_name(i.placement())));
  out += fmt::format("  {} {} {} {:>16} {:>20}\n", pad_right("modules", kTerminalLabel), pad_right("layout", 34),
                     pad_right("ranks", 16), "parameters", "model FLOP / iter");
  for (int m = 0; m < i.modules_size(); ++m) {
    const ir::ModuleInfo& mod = i.modules(m);
    std::string label = fmt::format("{} ({})", mod.name(), mod.is_encoder() ? "encoder" : "LLM");
    std::string flops = format_si(mod.model_flops_per_iteration(), "FLOP");
    out += fmt::format("    {} {} {} {} {}{}\n", pad_right(label, kTerminalLabel - 2), pad_right(module_layout(mod), 34),
                       pad_right(rank_range(mod.first_rank(), mod.num_ranks()), 16),
                       pad_left(count_si(static_cast<double>(mod.parameters())), 16), pad_left(flops, 20),
                       mod.frozen() ? "  frozen" : "");
  }
  if (!i.has_optimus()) return;
  const ir::OptimusInfo& o = i.optimus();
  row(out, "Optimus encoder plan",
      fmt::format("TP {} · PP {} · DP {}; m = {} encoder pipelines per LLM pipeline", o.encoder_tp(), o.encoder_pp(),
                  o.encoder_dp(), o.encoder_pipelines_per_llm_pipeline()));
  // "3 + 5 LLM microbatches"; "1 LLM microbatch for each of the 16 encoder
  // pipelines" when all are equal.
  std::string split;
  const auto& ms = o.microbatch_split();
  const bool uniform = ms.size() > 2 && std::all_of(ms.begin(), ms.end(), [&](int32_t v) { return v == ms[0]; });
  if (uniform) {
    split = fmt::format("{} LLM microbatch{} for each of the {} encoder pipelines", ms[0], ms[0] == 1 ? "" : "es",
                        ms.size());
  } else {
    for (int k = 0; k < ms.size(); ++k) split += fmt::format("{}{}", k == 0 ? "" : " + ", ms[k]);
    if (!split.empty()) split += " LLM microbatches";
  }
  if (!split.empty()) row(out, "microbatch split", split);
  row(out, "Optimus estimate",
      fmt::format("LLM only {} → estimated {} (simulated {})", format_duration(TimeNs(o.llm_only_iteration_ns())),
                  format_duration(TimeNs(o.estimated_iteration_ns())), format_duration(s.iteration_time)));
  row(out, "bubble efficiency",
      fmt::format("coarse {} · fine {}{}", format_percent(o.coarse_efficiency()), format_percent(o.fine_efficiency()),
                  o.coarse_only() ? " (coarse only)" : ""));
  row(out, "planner search", fmt::format("{} plans evaluated, {} pruned by memory; {} splits evaluated",
                                         o.plans_evaluated(), o.plans_pruned_by_memory(), o.splits_evaluated()));
  row(out, "deferral", optimus_deferral_text(o));
  row(out, "LLM bubbles seen", optimus_bubble_profile_text(o));
}

// "exact 71.2 % of kernel time (48 kernels), interpolated 20.1 % (12), extrapolated 8.7 % (5)";
// per class (`brief`): "exact 71.2 % (48), interpolated 20.1 % (12), extrapolated 8.7 % (5)".
std::string coverage_text(const CalibrationCoverage::Row& r, bool brief) {
  static constexpr const char* kKind[] = {"exact", "interpolated", "extrapolated"};
  const int64_t total = r.time_ns();
  std::string out;
  for (int k = 0; k < CalibrationCoverage::kKinds; ++k) {
    const auto& sh = r.shares[static_cast<size_t>(k)];
    const double pct = total > 0 ? 100.0 * static_cast<double>(sh.time_ns) / static_cast<double>(total) : 0.0;
    if (k == 0 && !brief) {
      out += fmt::format("{} {:.1f} % of kernel time ({} kernel{})", kKind[k], pct, sh.kernels, sh.kernels == 1 ? "" : "s");
    } else {
      out += fmt::format("{}{} {:.1f} % ({})", k == 0 ? "" : ", ", kKind[k], pct, sh.kernels);
    }
  }
  return out;
}

// "1.960 s, 1.957 s, 1.957 s (run 5.874 s)"; beyond 8 iterations the first
// three, the last two and the range.
std::string iterations_text(const Summary& s) {
  const auto& t = s.iteration_times;
  std::string list;
  auto add = [&](size_t k) { list += fmt::format("{}{}", list.empty() ? "" : ", ", format_duration(t[k])); };
  if (t.size() <= 8) {
    for (size_t k = 0; k < t.size(); ++k) add(k);
  } else {
    for (size_t k = 0; k < 3; ++k) add(k);
    list += ", …";
    for (size_t k = t.size() - 2; k < t.size(); ++k) add(k);
    const auto [lo, hi] = std::minmax_element(t.begin() + 1, t.end());
    list += fmt::format("; iterations 1–{} within {} – {}", t.size() - 1, format_duration(*lo), format_duration(*hi));
  }
  return fmt::format("{}: {} (run {})", t.size(), list, format_duration(s.run_time));
}

void calibration_block(std::string& out, const CalibrationCoverage& c) {
  out += "\n";
  row(out, "calibration", fmt::format("{} on {}; {}", c.profile, c.device, coverage_text(c.total, false)));
  for (const auto& r : c.classes) out += fmt::format("    {:<{}} {}\n", r.op_class, kTerminalLabel - 2, coverage_text(r, true));
}

void variability_block(std::string& out, const VariabilitySummary& v) {
  out += "\n";
  for (size_t i = 0; i < v.sources.size(); ++i) row(out, i == 0 ? "variability" : "", v.sources[i]);
  if (v.link_flaps > 0) row(out, "", fmt::format("{} link flap{} began during the run", v.link_flaps, v.link_flaps == 1 ? "" : "s"));
}

}  // namespace

std::string format_summary(const Summary& s, const RunStats& run) {
  const ir::ProgramInfo& i = s.info;
  const TimeNs t = s.iteration_time;
  std::string out;
  out += fmt::format("lacuna simulate: {}\n\n", s.scenario_name.empty() ? "(unnamed)" : s.scenario_name);
  row(out, "GPUs", fmt::format("{}", s.num_gpus));
  row(out, "plan", plan_text(i));
  row(out, "schedule",
      fmt::format("{}, {} microbatches (global batch {}, micro batch {}, seq {})", schedule_name(i.schedule()),
                  i.num_microbatches(), i.global_batch(), i.micro_batch(), i.seq_length()));
  std::string recompute = recompute_text(i.recompute(), i.recompute_num_layers());
  if (s.multimodal()) {
    // Per module: a placement may raise a module's recompute to fit HBM
    // (docs/memory-model.md#feasibility).
    recompute.clear();
    for (const ir::ModuleInfo& m : i.modules())
      recompute += fmt::format("{}{} {}", recompute.empty() ? "" : " · ", m.name(),
                               recompute_text(m.recompute(), m.recompute_num_layers()));
  }
  row(out, "recompute", fmt::format("{}{}", recompute, i.sequence_parallel() ? ", sequence parallel" : ""));
  if (s.multimodal()) multimodal_block(out, s);
  out += "\n";
  if (s.iterations > 1) {
    row(out, "iteration time", fmt::format("{} (steady-state mean of iterations 1–{})", format_duration(t),
                                           s.iterations - 1));
    row(out, "iterations", iterations_text(s));
  } else {
    row(out, "iteration time", format_duration(t));
  }
  row(out, "throughput", format_si(s.tokens_per_s, "tokens/s"));
  row(out, "model FLOP/s per GPU", fmt::format("{} (peak {})", format_flops_rate(s.tflops_per_gpu * 1e12),
                                               format_flops_rate(i.peak_flops_per_gpu())));
  row(out, "MFU", format_percent(s.mfu));
  if (i.has_fp8() && i.peak_bf16_flops_per_gpu() > 0 && i.peak_fp8_flops_per_gpu() > 0) {
    // FP8 programs state MFU on both peaks (docs/fp8.md#mfu).
    for (const auto& [label, name, peak] : {std::tuple{"MFU on BF16 peak", "BF16", i.peak_bf16_flops_per_gpu()},
                                            std::tuple{"MFU on FP8 peak", "FP8", i.peak_fp8_flops_per_gpu()}})
      row(out, label,
          fmt::format("{} (model FLOP/s / {} dense {})", format_percent(s.mfu_on(peak)), format_flops_rate(peak), name));
  }
  row(out, "HFU", format_percent(s.hfu));
  if (s.monte_carlo) out += format_monte_carlo(*s.monte_carlo);
  if (s.fp8) out += format_fp8_breakdown(*s.fp8);

  // Per-rank figures are per iteration: over several iterations, the run's
  // divided by N, as fractions of run time / N (docs/metrics.md#iterations).
  const TimeNs window = s.rank_window > TimeNs::zero() ? s.rank_window : t;
  if (s.iterations > 1) {
    out += fmt::format("\n  per iteration, over the run: run time {} / {} = {}\n", format_duration(s.run_time),
                       s.iterations, format_duration(window));
  }
  out += fmt::format("\n  compute-stream time per rank {:>14} {:>9} {:>14} {:>9}  {}\n", "median", "% iter",
                     "max", "% iter", "worst rank");
  auto stats_row = [&](std::string_view name, const Stats& st) {
    out += fmt::format("    {:<28} {} {:>9} {} {:>9}  {}\n", name, pad_left(format_duration(TimeNs(st.median)), 14),
                       format_percent(frac_of_total(st.median, window)), pad_left(format_duration(TimeNs(st.max)), 14),
                       format_percent(frac_of_total(st.max, window)), st.worst_rank);
  };
  stats_row("busy", s.busy);
  for (int p = ir::FORWARD; p <= ir::OPTIMIZER_STEP; ++p) {
    const Stats& st = s.busy_by_phase[static_cast<size_t>(p)];
    if (st.max > 0) stats_row(fmt::format("  {}", phase_key(static_cast<ir::Phase>(p))), st);
  }
  if (s.multimodal()) stats_row("encoder compute", s.encoder_compute);
  for (Bubble b : kAllBubbles) {
    if (bubble_shown(b, s.multimodal(), s.moe())) {
      stats_row(fmt::format("bubble {}", bubble_key(b)), s.bubbles[static_cast<int>(b)]);
    }
  }
  stats_row("bubble total", s.idle);

  out += "\n";
  const Stats& m = s.peak_memory;
  row(out, "peak memory per rank",
      fmt::format("min {} · median {} · max {} (rank {})", format_gb(Bytes(m.min)), format_gb(Bytes(m.median)),
                  format_gb(Bytes(m.max)), m.worst_rank));
  if (s.memory_capacity > Bytes::zero()) {
    row(out, "HBM capacity", fmt::format("{} ({:.0f} GiB); {} of {} ranks over capacity", format_gb(s.memory_capacity),
                                         s.memory_capacity.gib(), s.over_capacity_ranks, s.num_gpus));
  } else {
    row(out, "HBM capacity", "unknown");
  }

  // Network sections only when the caller filled them (additive: the rest of
  // the table keeps its form).
  if (s.comm) out += format_comm(*s.comm);
  if (s.links) out += format_links(*s.links);
  if (s.calibration) calibration_block(out, *s.calibration);
  if (s.critical_path) out += format_critical_path(*s.critical_path);
  if (s.stragglers) out += format_stragglers(*s.stragglers);
  if (s.variability) variability_block(out, *s.variability);

  out += "\n";
  row(out, "cost model", s.cost_model);
  row(out, "mode", !run.mode.empty() ? run.mode
                  : s.folded        ? fmt::format("folded: {} of {} ranks simulated", s.simulated_ranks, s.num_gpus)
                                    : fmt::format("full: all {} ranks simulated", s.num_gpus));
  if (!run.estimate.empty()) row(out, "estimate", run.estimate);
  const double eps = run.wall_seconds > 0 ? static_cast<double>(run.events) / run.wall_seconds : 0.0;
  row(out, run.label, fmt::format("{:.3f} s wall, {} {} ({})", run.wall_seconds, run.events, run.unit,
                                  format_si(eps, run.unit + "/s")));
  if (!run.tip.empty()) row(out, "tip", run.tip);
  return out;
}

std::string fold_tip(double wall_seconds, int32_t all_ranks, int32_t folded_ranks, bool flow_network,
                     uint64_t folded_events, uint64_t run_events) {
  if (!(wall_seconds > kFoldTipSeconds) || all_ranks <= 0 || folded_ranks <= 0 || folded_ranks >= all_ranks) return "";
  std::string events;
  if (folded_events > 0 && run_events > 0) {
    events = fmt::format(" (about {}, against this run's {})", format_si(static_cast<double>(folded_events), "events"),
                         format_si(static_cast<double>(run_events), "events"));
  }
  return fmt::format("‹fold› simulates {} of {} ranks{}; with no variability identical ranks stay identical{}",
                     folded_ranks, all_ranks, events,
                     flow_network ? ", and the flow network sees only the simulated ranks' traffic "
                                    "(docs/network.md#folded-runs)"
                                  : ": the same result");
}

}  // namespace lacuna::report
