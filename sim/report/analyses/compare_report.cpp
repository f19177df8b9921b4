#include "sim/report/analyses/compare_report.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>

#include <fmt/format.h>

#include "sim/report/analyses/compare_verdict.h"
#include "sim/report/formats/format.h"
#include "sim/report/formats/json_util.h"
#include "sim/report/formats/names.h"
#include "sim/report/formats/optimus_text.h"
#include "sim/core/version.h"

namespace lacuna::report {

std::string outcome_name(const PlacementOutcome& p) {
  std::string n(placement_name(p.kind));
  return p.variant.empty() ? n : n + " " + p.variant;
}

std::string outcome_key(const PlacementOutcome& p) {
  std::string k = placement_key(p.kind);
  if (p.variant.empty()) return k;
  k += "_";
  for (char ch : p.variant)
    if (ch != '-') k += static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return k;
}

MeanBubbles mean_bubbles(const Summary& s) {
  MeanBubbles m;
  int64_t weight = 0;
  std::array<int64_t, kNumBubbles> sums{};
  int64_t total = 0;
  for (const RankAccount& r : s.ranks) {
    const int64_t w = static_cast<int64_t>(std::max<size_t>(1, r.represents.size()));
    weight += w;
    for (Bubble b : kAllBubbles) sums[static_cast<size_t>(b)] += w * r.bubble(b).count();
    total += w * r.idle().count();
  }
  if (weight == 0) return m;
  // Integer means (deterministic); each rounds down, so the categories may sum
  // to a few ns less than `total`.
  for (size_t b = 0; b < sums.size(); ++b) m.by_category[b] = sums[b] / weight;
  m.total = total / weight;
  return m;
}

std::optional<double> encoder_hidden_fraction(TimeNs placement, std::optional<TimeNs> llm_only,
                                              TimeNs encoder_compute_max) {
  if (!llm_only || encoder_compute_max <= TimeNs::zero()) return std::nullopt;
  const double added = static_cast<double>((placement - *llm_only).count());
  const double h = 1.0 - added / static_cast<double>(encoder_compute_max.count());
  return std::clamp(h, 0.0, 1.0);
}

namespace {

const Summary* baseline_of(const Comparison& c) {
  for (const PlacementOutcome& p : c.placements) {
    if (p.kind == scenario::MEGATRON_BASELINE && p.summary && p.fits()) return &*p.summary;
  }
  return nullptr;
}

}  // namespace

std::vector<size_t> feasible_ranking(const Comparison& c) {
  std::vector<size_t> out;
  for (size_t i = 0; i < c.placements.size(); ++i)
    if (c.placements[i].summary && c.placements[i].fits()) out.push_back(i);
  std::stable_sort(out.begin(), out.end(), [&](size_t a, size_t b) {
    return c.placements[a].summary->iteration_time < c.placements[b].summary->iteration_time;
  });
  return out;
}

PlacementMetrics placement_metrics(const Comparison& c, size_t index) {
  PlacementMetrics m;
  const PlacementOutcome& p = c.placements.at(index);
  if (!p.summary) return m;
  const Summary& s = *p.summary;
  const std::vector<size_t> ranking = feasible_ranking(c);
  if (const auto at = std::find(ranking.begin(), ranking.end(), index); at != ranking.end())
    m.rank = static_cast<int32_t>(at - ranking.begin()) + 1;
  const Summary* base = baseline_of(c);
  if (base != nullptr && p.fits() && s.iteration_time > TimeNs::zero()) {
    m.speedup = static_cast<double>(base->iteration_time.count()) / static_cast<double>(s.iteration_time.count());
  }
  std::optional<TimeNs> llm;
  if (c.llm_only) llm = c.llm_only->iteration_time;
  m.encoder_hidden = encoder_hidden_fraction(s.iteration_time, llm, TimeNs(s.encoder_compute.max));
  m.bubbles = mean_bubbles(s);
  return m;
}

// ---------------------------------------------------------------- terminal

namespace {

constexpr int kLabel = 30;


const char* kNone = "—";

std::string time_and_share(int64_t ns, TimeNs iteration) {
  const double share = iteration.count() > 0 ? static_cast<double>(ns) / static_cast<double>(iteration.count()) : 0;
  return fmt::format("{} · {:.1f} %", format_duration(TimeNs(ns)), share * 100.0);
}

// `text` word-wrapped to `width` columns, continuation lines indented by
// `indent` spaces.
std::string wrap(const std::string& text, size_t width, size_t indent) {
  std::string out, line;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(start, end - start);
    if (!line.empty() && display_columns(line) + 1 + display_columns(word) > width) {
      out += line + "\n" + std::string(indent, ' ');
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
    start = end + 1;
  }
  return out + line;
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

}  // namespace

std::string format_comparison(const Comparison& c, const CompareRunStats& run) {
  const size_t n = c.placements.size();
  std::vector<PlacementMetrics> metrics;
  size_t width = 20;
  for (size_t i = 0; i < n; ++i) {
    metrics.push_back(placement_metrics(c, i));
    width = std::max(width, display_columns(outcome_name(c.placements[i])) + 2);
  }
  width = std::max<size_t>(width, 22);

  std::string out;
  out += fmt::format("lacuna compare: {}\n\n", c.scenario_name.empty() ? "(unnamed)" : c.scenario_name);
  out += "  " + std::string(kLabel, ' ');
  for (const PlacementOutcome& p : c.placements) out += pad_left(outcome_name(p), width);
  out += "\n";

  // One table row: `cell` gives the text for a simulated placement.
  auto line = [&](const std::string& label, const std::function<std::string(const Summary&, const PlacementMetrics&)>& cell) {
    out += "  " + pad_right(label, kLabel);
    for (size_t i = 0; i < n; ++i) {
      const PlacementOutcome& p = c.placements[i];
      out += pad_left(p.summary ? cell(*p.summary, metrics[i]) : std::string(kNone), width);
    }
    out += "\n";
  };

  line("GPUs", [](const Summary& s, const PlacementMetrics&) { return fmt::format("{}", s.num_gpus); });
  line("iteration time", [](const Summary& s, const PlacementMetrics&) { return format_duration(s.iteration_time); });
  line("rank (of those that fit HBM)", [](const Summary&, const PlacementMetrics& m) {
    return m.rank ? fmt::format("{}", *m.rank) : std::string("over HBM");
  });
  line("speedup vs Megatron baseline", [](const Summary&, const PlacementMetrics& m) {
    return m.speedup ? fmt::format("{:.3f} ×", *m.speedup) : std::string(kNone);
  });
  line("throughput", [](const Summary& s, const PlacementMetrics&) { return format_si(s.tokens_per_s, "tokens/s"); });
  line("model FLOP/s per GPU",
       [](const Summary& s, const PlacementMetrics&) { return format_flops_rate(s.tflops_per_gpu * 1e12); });
  line("MFU", [](const Summary& s, const PlacementMetrics&) { return format_percent(s.mfu); });

  out += "\n  idle per GPU (mean over GPUs)\n";
  auto bubble_line = [&](const std::string& label, std::vector<Bubble> parts) {
    line("  " + label, [parts](const Summary& s, const PlacementMetrics& m) {
      int64_t ns = 0;
      for (Bubble b : parts) ns += m.bubbles.of(b);
      return time_and_share(ns, s.iteration_time);
    });
  };
  bubble_line("PP warm-up + cool-down", {Bubble::kPpWarmup, Bubble::kPpCooldown});
  bubble_line("PP other", {Bubble::kPpOther});
  bubble_line("TP exposed", {Bubble::kTpExposed});
  bubble_line("CP exposed", {Bubble::kCpExposed});
  bubble_line("DP exposed", {Bubble::kDpExposed});
  bubble_line("PP exposed", {Bubble::kPpExposed});
  bubble_line(std::string(kHostOverheadLabel), {Bubble::kHostOverhead});
  bubble_line("boundary exposed", {Bubble::kBoundaryExposed});
  bubble_line("encoder comm exposed", {Bubble::kEncoderCommExposed});
  // MoE workloads: the wait for the busiest EP rank and EP transfers
  // (docs/moe.md#load-imbalance); dense comparisons keep their rows.
  const bool any_moe = std::any_of(c.placements.begin(), c.placements.end(),
                                   [](const PlacementOutcome& p) { return p.summary && p.summary->moe(); });
  if (any_moe) {
    bubble_line("MoE load imbalance", {Bubble::kMoeImbalance});
    bubble_line("EP exposed", {Bubble::kEpExposed});
  }
  line("  total", [](const Summary& s, const PlacementMetrics& m) { return time_and_share(m.bubbles.total, s.iteration_time); });
  out += "\n";

  line("encoder compute (max GPU)",
       [](const Summary& s, const PlacementMetrics&) { return format_duration(TimeNs(s.encoder_compute.max)); });
  line("encoder hidden in bubbles", [](const Summary&, const PlacementMetrics& m) {
    return m.encoder_hidden ? format_percent(*m.encoder_hidden) : std::string(kNone);
  });
  bool any_optimus = false;
  for (const PlacementOutcome& p : c.placements) any_optimus |= p.summary && p.summary->info.has_optimus();
  if (any_optimus) {
    line("Optimus coarse / fine", [](const Summary& s, const PlacementMetrics&) {
      if (!s.info.has_optimus()) return std::string(kNone);
      return fmt::format("{:.1f} % / {:.1f} %", s.info.optimus().coarse_efficiency() * 100.0,
                         s.info.optimus().fine_efficiency() * 100.0);
    });
  }
  line("peak memory (max GPU)", [](const Summary& s, const PlacementMetrics&) {
    std::string t = format_gb(Bytes(s.peak_memory.max));
    if (s.over_capacity_ranks > 0) t += " (!)";
    return t;
  });

  bool any_over = false, any_failed = false;
  for (const PlacementOutcome& p : c.placements) {
    any_over |= p.summary && !p.fits();
    any_failed |= !p.summary;
  }
  out += "\n";
  // Names under the table: 20 columns, wider for a longer one
  // ("heterogeneous non-colocated").
  int name_w = 20;
  for (const PlacementOutcome& p : c.placements)
    if (!p.summary || !p.fits()) name_w = std::max(name_w, static_cast<int>(display_columns(outcome_name(p))));
  if (any_over) {
    // Not ranked: a rank over HBM stops with an out-of-memory error.
    out += "  (!) does not fit HBM, not ranked\n";
    for (const PlacementOutcome& p : c.placements) {
      if (!p.summary || p.fits()) continue;
      const std::string why =
          !p.over_memory.empty()
              ? p.over_memory
              : fmt::format("{} of {} GPUs over the HBM capacity ({})", p.summary->over_capacity_ranks,
                            p.summary->num_gpus, format_gb(p.summary->memory_capacity));
      out += fmt::format("    {:<{}} {}\n", outcome_name(p), name_w, wrap(why, 90, name_w + 5));
    }
    out += "\n";
  }
  if (any_failed) {
    out += "  not simulated\n";
    for (const PlacementOutcome& p : c.placements) {
      if (!p.summary) {
        const std::string why = first_line(p.reason.empty() ? p.error : p.reason);
        out += fmt::format("    {:<{}} {}\n", outcome_name(p), name_w, wrap(why, 90, name_w + 5));
      }
    }
    out += "\n";
  }
  bool any_layout = false;
  for (const PlacementOutcome& p : c.placements) any_layout |= !p.layout.empty();
  if (any_layout) {
    out += "  heterogeneous layouts\n";
    for (const PlacementOutcome& p : c.placements) {
      if (p.layout.empty()) continue;
      std::string text = p.layout;
      if (p.summary)
        if (const auto sh = island_idle_shares(*p.summary))
          text += fmt::format("; idle: island {:.1f} %, LLM {:.1f} %", sh->island * 100.0, sh->llm * 100.0);
      out += fmt::format("    {:<20} {}\n", p.variant, wrap(text, 90, 25));
    }
    out += "\n";
  }
  if (const std::string v = comparison_verdict(c); !v.empty()) out += "  verdict: " + wrap(v, 100, 11) + "\n\n";
  auto row = [&](std::string_view label, const std::string& value) {
    out += fmt::format("  {} {}\n", pad_right(std::string(label), kLabel - 2), value);
  };
  if (c.llm_only) {
    row("LLM alone", fmt::format("{} (the scenario without encoders; reference for \"encoder hidden\")",
                                 format_duration(c.llm_only->iteration_time)));
  } else {
    row("LLM alone", wrap("not simulated: " + first_line(c.llm_only_error), 90, 31));
  }
  row("cost model", c.cost_model);
  row("mode", c.folded ? "folded: one representative rank per class simulated" : "full: every rank simulated");
  if (run.optimus_planner_seconds) row("Optimus planner", fmt::format("{:.3f} s wall", *run.optimus_planner_seconds));
  for (const PlacementOutcome& p : c.placements) {
    if (!p.summary || !p.summary->info.has_optimus()) continue;
    const auto& o = p.summary->info.optimus();
    row("Optimus plan", fmt::format("encoder TP {} · PP {} · DP {} ({} encoder pipelines per LLM pipeline)",
                                    o.encoder_tp(), o.encoder_pp(), o.encoder_dp(),
                                    o.encoder_pipelines_per_llm_pipeline()));
    row("Optimus fine step", wrap(fmt::format("{} forward / {} backward microbatches moved into bubbles; {} forward / {} "
                                              "backward passes cut at the kernel level",
                                              o.forward_moves(), o.backward_moves(), o.kernel_level_cuts(),
                                              o.kernel_level_backward_cuts()),
                                  90, 31));
    row("Optimus deferral", wrap(optimus_deferral_text(o), 90, 31));
    row("LLM bubbles seen", wrap(optimus_bubble_profile_text(o) + " of the LLM alone", 90, 31));
  }
  row("compare", fmt::format("{:.3f} s wall", run.total_wall_seconds));
  return out;
}

// ---------------------------------------------------------------- JSON

std::string comparison_json(const Comparison& c) {
  using json_util::Json;
  using json_util::secs;
  Json top;
  top["lacuna_version"] = lacuna_version();
  top["scenario"] = c.scenario_name;
  top["scenario_file"] = c.scenario_file;
  top["cost_model"] = c.cost_model;
  top["mode"] = c.folded ? "folded" : "full";
  Json llm;
  if (c.llm_only) {
    llm["iteration_time_s"] = secs(c.llm_only->iteration_time);
    llm["iteration_time_ns"] = c.llm_only->iteration_time.count();
    llm["num_gpus"] = c.llm_only->num_gpus;
    llm["mfu"] = c.llm_only->mfu;
  } else {
    llm["error"] = c.llm_only_error;
  }
  top["llm_only"] = std::move(llm);
  const Summary* base = baseline_of(c);
  top["baseline"] = base != nullptr ? Json(placement_key(scenario::MEGATRON_BASELINE)) : Json(nullptr);
  Json ranking = Json::array();
  for (size_t i : feasible_ranking(c)) ranking.push_back(outcome_key(c.placements[i]));
  top["ranking"] = std::move(ranking);
  top["verdict"] = comparison_verdict(c);

  std::string list = "[";
  for (size_t i = 0; i < c.placements.size(); ++i) {
    const PlacementOutcome& p = c.placements[i];
    Json j;
    j["placement"] = placement_key(p.kind);
    j["name"] = outcome_name(p);
    if (!p.variant.empty()) {
      j["variant"] = p.variant;
      j["id"] = outcome_key(p);
      j["layout"] = p.layout;
    }
    if (!p.summary) {
      j["status"] = "failed";
      j["error"] = p.error;
    } else {
      const Summary& s = *p.summary;
      const PlacementMetrics m = placement_metrics(c, i);
      auto opt = [](const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); };
      j["status"] = "ok";
      j["fits"] = p.fits();
      j["rank"] = m.rank ? Json(*m.rank) : Json(nullptr);
      if (!p.fits()) j["infeasible_reason"] = p.over_memory;
      j["num_gpus"] = s.num_gpus;
      j["iteration_time_s"] = secs(s.iteration_time);
      j["iteration_time_ns"] = s.iteration_time.count();
      j["speedup"] = opt(m.speedup);
      j["tokens_per_s"] = s.tokens_per_s;
      j["tflops_per_gpu"] = s.tflops_per_gpu;
      j["mfu"] = s.mfu;
      j["hfu"] = s.hfu;
      j["model_flops_per_iteration"] = s.info.model_flops_per_iteration();
      j["peak_memory_bytes"] = s.peak_memory.max;
      j["peak_memory_rank"] = s.peak_memory.worst_rank;
      j["over_capacity_ranks"] = s.over_capacity_ranks;
      Json b;
      b["pp_warmup_cooldown_s"] = secs(m.bubbles.of(Bubble::kPpWarmup) + m.bubbles.of(Bubble::kPpCooldown));
      for (Bubble k : kAllBubbles) {
        if (k == Bubble::kPpWarmup || k == Bubble::kPpCooldown) continue;
        if (!bubble_shown(k, true, s.moe())) continue;
        b[std::string(bubble_key(k)) + "_s"] = secs(m.bubbles.of(k));
      }
      b["total_s"] = secs(m.bubbles.total);
      j["bubbles"] = std::move(b);
      j["encoder_compute_max_s"] = secs(s.encoder_compute.max);
      j["encoder_compute_max_rank"] = s.encoder_compute.worst_rank;
      j["encoder_hidden_fraction"] = opt(m.encoder_hidden);
      j["modules"] = json_util::modules(s.info);
      if (s.info.has_optimus()) j["optimus"] = json_util::optimus(s.info.optimus());
      if (const auto sh = island_idle_shares(s)) {
        j["idle_share_island"] = sh->island;
        j["idle_share_llm"] = sh->llm;
      }
    }
    list += i == 0 ? "\n  " : ",\n  ";
    list += j.dump();
  }
  list += c.placements.empty() ? "]" : "\n ]";
  return json_util::top_level_lines(top, "placements", list);
}

}  // namespace lacuna::report
