#include "sim/search/search_outputs.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/report/formats/csv.h"
#include "sim/report/formats/svg_util.h"

namespace lacuna::search {
namespace {

const char* recompute_name(scenario::Recompute r) {
  switch (r) {
    case scenario::RECOMPUTE_SELECTIVE: return "selective";
    case scenario::RECOMPUTE_FULL: return "full";
    default: return "none";
  }
}

const char* schedule_name(scenario::ScheduleKind k) {
  switch (k) {
    case scenario::GPIPE: return "gpipe";
    case scenario::INTERLEAVED_1F1B: return "interleaved-1f1b";
    case scenario::ZB_H1: return "zb-h1";
    default: return "1f1b";
  }
}

// MoE searches add ep and expert_tp after dp; dense ones keep their columns.
std::vector<std::string> columns(bool moe) {
  std::vector<std::string> c = {
      "id", "num_nodes", "gpus", "tp", "sequence_parallel", "cp", "pp", "layer_split", "last_stage_layers",
      "virtual_stages", "dp", "micro_batch", "recompute", "distributed_optimizer", "dp_overlap", "tp_comm_overlap",
      "pipeline_p2p", "schedule", "placement", "fate", "screen_iteration_s", "screen_tokens_per_s", "screen_mfu",
      "screen_memory_gb", "screen_memory_lower_bound_gb", "screen_bubble_s", "screen_exposed_comm_s",
      "sim_iteration_s", "sim_tokens_per_s", "sim_mfu", "sim_peak_memory_gb", "sim_gpus", "sim_rank", "note"};
  if (moe) {
    const auto dp = std::find(c.begin(), c.end(), "dp") + 1;
    c.insert(dp, {"ep", "expert_tp"});
  }
  return c;
}

// One candidate's row, field by field in `columns()` order, each handed to
// `emit` as text: the CSV quotes and joins them, the JSON collects them. No
// per-row containers: a search writes hundreds of thousands of rows.
template <class Emit>
void for_each_field(const SearchResult& r, size_t id, const std::vector<int64_t>& rank_of, Emit&& emit) {
  const Candidate& c = r.candidates[id];
  const Plan& p = c.plan;
  fmt::memory_buffer buf;
  auto integer = [&](int64_t v) {
    buf.clear();
    fmt::format_to(std::back_inserter(buf), "{}", v);
    emit(std::string_view(buf.data(), buf.size()));
  };
  auto number = [&](double v) {
    buf.clear();
    fmt::format_to(std::back_inserter(buf), "{:.6g}", v);
    emit(std::string_view(buf.data(), buf.size()));
  };
  auto flag = [&](bool v) { emit(v ? "true" : "false"); };
  integer(static_cast<int64_t>(id));
  integer(p.num_nodes);
  integer(p.gpus(r.gpus_per_node));
  integer(p.tp);
  flag(p.sequence_parallel);
  integer(p.cp);
  integer(p.pp);
  emit(p.split == LayerSplit::kEven ? "even" : "light-last");
  if (p.split == LayerSplit::kEven) {
    emit("");
  } else {
    integer(p.last_stage_layers);
  }
  integer(p.virtual_stages);
  integer(p.dp);
  if (r.moe) {
    integer(p.ep);
    integer(p.expert_tp);
  }
  integer(p.micro_batch);
  emit(recompute_name(p.recompute));
  flag(p.distributed_optimizer);
  flag(p.dp_overlap);
  flag(p.tp_comm_overlap);
  emit(p.pp > 1 ? (p.p2p_overlapped ? "overlapped" : "blocking") : "");
  emit(schedule_name(p.schedule));
  emit(placement_name(p.placement));
  emit(fate_key(c.fate));
  if (c.screen.iteration_s > 0) {
    for (double v : {c.screen.iteration_s, c.screen.tokens_per_s, c.screen.mfu, c.screen.memory.gb(),
                     c.screen.memory_lower_bound.gb(), c.screen.bubble_s, c.screen.exposed_comm_s})
      number(v);
  } else {
    for (int k = 0; k < 7; ++k) emit("");
  }
  if (c.simulated && c.simulated->problem.empty()) {
    const Simulated& sim = *c.simulated;
    for (double v : {sim.iteration_s, sim.tokens_per_s, sim.mfu, static_cast<double>(sim.peak_memory_bytes) * 1e-9})
      number(v);
    integer(sim.gpus);
    if (rank_of[id] > 0) {
      integer(rank_of[id]);
    } else {
      emit("");
    }
    emit(sim.layout);
  } else {
    for (int k = 0; k < 6; ++k) emit("");
    emit(c.simulated ? std::string_view(c.simulated->problem) : std::string_view());
  }
}

std::vector<int64_t> ranks(const SearchResult& r) {
  std::vector<int64_t> rank_of(r.candidates.size(), 0);
  for (size_t k = 0; k < r.ranking.size(); ++k) rank_of[r.ranking[k]] = static_cast<int64_t>(k + 1);
  return rank_of;
}

// Most fields are numbers and keywords that need no quoting; the rest go
// through the one RFC 4180 quoting every lacuna CSV uses.
void append_csv_field(std::string& out, std::string_view s) {
  if (s.find_first_of(",\"\r\n ") == std::string_view::npos) {
    out.append(s);
  } else {
    out += report::csv::field(s);
  }
}

nlohmann::json plan_json(const SearchResult& r, size_t id) {
  const Candidate& c = r.candidates[id];
  nlohmann::json j{{"id", id}, {"plan", describe(c.plan)}, {"fate", fate_key(c.fate)}};
  j["screen"] = {{"iteration_s", c.screen.iteration_s},
                 {"tokens_per_s", c.screen.tokens_per_s},
                 {"mfu", c.screen.mfu},
                 {"memory_gb", c.screen.memory.gb()}};
  if (c.simulated && c.simulated->problem.empty()) {
    const Simulated& s = *c.simulated;
    j["simulated"] = {{"iteration_s", s.iteration_s},
                      {"tokens_per_s", s.tokens_per_s},
                      {"mfu", s.mfu},
                      {"gpus", s.gpus},
                      {"peak_memory_gb", static_cast<double>(s.peak_memory_bytes) * 1e-9}};
    if (!s.layout.empty()) j["simulated"]["layout"] = s.layout;
  }
  return j;
}

// The simulated plans that fit, and their fronts.
struct Fronts {
  std::vector<size_t> fitting;      // candidate ids
  std::vector<size_t> memory_front; // candidate ids, memory ascending
  std::vector<size_t> gpu_front;    // candidate ids, GPUs ascending (GPU count free)
};

Fronts fronts(const SearchResult& r) {
  Fronts f;
  std::vector<double> mem, gpus, tps;
  for (size_t id : r.ranking) {
    if (r.candidates[id].fate != Fate::kSimulated) continue;
    const Simulated& s = *r.candidates[id].simulated;
    f.fitting.push_back(id);
    mem.push_back(static_cast<double>(s.peak_memory_bytes));
    gpus.push_back(static_cast<double>(s.gpus));
    tps.push_back(s.tokens_per_s);
  }
  for (size_t k : pareto_front(mem, tps)) f.memory_front.push_back(f.fitting[k]);
  if (r.gpu_count_free)
    for (size_t k : pareto_front(gpus, tps)) f.gpu_front.push_back(f.fitting[k]);
  return f;
}

}  // namespace

std::vector<size_t> pareto_front(const std::vector<double>& xs, const std::vector<double>& ys) {
  std::vector<size_t> order(xs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  // x ascending, y descending, then index: the first of equal points wins.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (xs[a] != xs[b]) return xs[a] < xs[b];
    return ys[a] > ys[b];
  });
  std::vector<size_t> out;
  double best = -std::numeric_limits<double>::infinity();
  for (size_t i : order) {
    if (ys[i] > best) {
      out.push_back(i);
      best = ys[i];
    }
  }
  return out;
}

std::string format_search(const SearchResult& r, size_t n) {
  std::string out = fmt::format("Search of {}: {} candidate plans", r.scenario_name, r.candidates.size());
  if (!r.constraints.empty()) {
    out += " under";
    for (const std::string& c : r.constraints) out += " " + c;
  }
  out += fmt::format("; memory limit {:.1f} GB per GPU, at most {} GPUs\n\n",
                     static_cast<double>(r.memory_limit_bytes) * 1e-9, r.gpu_budget);
  out += "| fate | plans | what it means |\n|---|---|---|\n";
  for (int f = 0; f < kNumFates; ++f) {
    if (r.fate_counts[static_cast<size_t>(f)] == 0) continue;
    out += fmt::format("| {} | {} | {} |\n", fate_key(static_cast<Fate>(f)), r.fate_counts[static_cast<size_t>(f)],
                       fate_text(static_cast<Fate>(f)));
  }
  out += "\n";
  if (r.rank_correlation) {
    out += fmt::format("Screen against simulation: Spearman rank correlation {:.3f} over the {} simulated plans that ran\n\n",
                       *r.rank_correlation, r.ranking.size());
  } else {
    out += fmt::format("Screen against simulation: too few simulated plans ({}) for a rank correlation\n\n",
                       r.ranking.size());
  }
  if (r.ranking.empty()) return out + "No plan was simulated.\n";
  std::vector<size_t> by_screen = r.ranking;
  std::stable_sort(by_screen.begin(), by_screen.end(), [&](size_t a, size_t b) {
    return r.candidates[a].screen.tokens_per_s > r.candidates[b].screen.tokens_per_s;
  });
  std::vector<int64_t> screen_rank(r.candidates.size(), 0);
  for (size_t k = 0; k < by_screen.size(); ++k) screen_rank[by_screen[k]] = static_cast<int64_t>(k + 1);
  out += fmt::format("Best {} of the simulated plans (folded simulation, tokens/s; screen rank = its rank by the screen)\n\n",
                     std::min(n, r.ranking.size()));
  out += "| rank | id | plan | GPUs | iteration (s) | tokens/s | MFU | peak memory (GB) | screen tokens/s | screen rank |\n";
  out += "|---|---|---|---|---|---|---|---|---|---|\n";
  for (size_t k = 0; k < r.ranking.size() && k < n; ++k) {
    const size_t id = r.ranking[k];
    const Candidate& c = r.candidates[id];
    const Simulated& s = *c.simulated;
    out += fmt::format("| {} | {} | {} | {}{} | {:.3f} | {:.0f} | {:.1f} % | {:.1f}{} | {:.0f} | {} |\n", k + 1, id,
                       describe(c.plan), s.gpus, c.fate == Fate::kOverGpuBudget ? " (over)" : "", s.iteration_s, s.tokens_per_s, s.mfu * 100,
                       static_cast<double>(s.peak_memory_bytes) * 1e-9,
                       c.fate == Fate::kOverMemoryCompiled ? " (over)" : "", c.screen.tokens_per_s, screen_rank[id]);
  }
  return out;
}

std::string search_csv(const SearchResult& r) {
  std::string out;
  const std::vector<std::string> cols = columns(r.moe);
  for (size_t i = 0; i < cols.size(); ++i) out += (i ? "," : "") + cols[i];
  out += "\n";
  const std::vector<int64_t> rank_of = ranks(r);
  out.reserve(out.size() + r.candidates.size() * 160);
  for (size_t id = 0; id < r.candidates.size(); ++id) {
    bool first = true;
    for_each_field(r, id, rank_of, [&](std::string_view field) {
      if (!first) out += ',';
      first = false;
      append_csv_field(out, field);
    });
    out += '\n';
  }
  return out;
}

std::string search_json(const SearchResult& r, size_t n, bool summary_only) {
  nlohmann::json j;
  j["scenario"] = r.scenario_name;
  j["constraints"] = r.constraints;
  j["memory_limit_gb"] = static_cast<double>(r.memory_limit_bytes) * 1e-9;
  j["gpu_budget"] = r.gpu_budget;
  j["candidates_total"] = r.candidates.size();
  nlohmann::json counts = nlohmann::json::object();
  for (int f = 0; f < kNumFates; ++f) {
    if (fate_shown(static_cast<Fate>(f), r.moe)) {
      counts[std::string(fate_key(static_cast<Fate>(f)))] = r.fate_counts[static_cast<size_t>(f)];
    }
  }
  j["fates"] = counts;
  j["rank_correlation"] = r.rank_correlation ? nlohmann::json(*r.rank_correlation) : nlohmann::json(nullptr);
  nlohmann::json top = nlohmann::json::array();
  for (size_t k = 0; k < r.ranking.size() && k < n; ++k) top.push_back(plan_json(r, r.ranking[k]));
  j["top"] = top;
  const Fronts f = fronts(r);
  j["pareto_memory"] = f.memory_front;
  if (r.gpu_count_free) j["pareto_gpus"] = f.gpu_front;
  if (!summary_only) {
    j["columns"] = columns(r.moe);
    nlohmann::json rows = nlohmann::json::array();
    const std::vector<int64_t> rank_of = ranks(r);
    for (size_t id = 0; id < r.candidates.size(); ++id) {
      nlohmann::json row = nlohmann::json::array();
      for_each_field(r, id, rank_of, [&](std::string_view field) { row.push_back(std::string(field)); });
      rows.push_back(std::move(row));
    }
    j["candidates"] = rows;
  }
  return j.dump(1) + "\n";
}

std::string search_svg(const SearchResult& r) {
  const bool two = r.gpu_count_free;
  const double panel_w = 560, panel_h = 380, left = 80, top = 70;
  const double width = left + panel_w + (two ? panel_w + 80 : 0) + 40, height = top + panel_h + 70;
  std::string out;
  report::svg::begin_document(out, width, height);
  report::svg::title(out, left, fmt::format("{}: tokens/s of the searched plans", r.scenario_name),
                     "grey dots: screened estimate (plans that fit); rings: simulated; line: Pareto front of the simulated");
  // Screened points that fit, and simulated ones.
  struct Point {
    double x_mem, x_gpus, y;
    bool simulated;
  };
  std::vector<Point> pts;
  for (const Candidate& c : r.candidates) {
    if (c.fate == Fate::kSimulated) {
      pts.push_back({static_cast<double>(c.simulated->peak_memory_bytes) * 1e-9, static_cast<double>(c.simulated->gpus),
                     c.simulated->tokens_per_s, true});
    } else if (c.fate == Fate::kScreened) {
      pts.push_back({c.screen.memory.gb(), static_cast<double>(c.screen.gpus), c.screen.tokens_per_s, false});
    }
  }
  // Many screened plans: draw at most 20,000 of them (every k-th, by id).
  const size_t screened = static_cast<size_t>(std::count_if(pts.begin(), pts.end(), [](const Point& p) { return !p.simulated; }));
  const size_t stride = std::max<size_t>(1, screened / 20000);
  double ymax = 0;
  for (const Point& p : pts) ymax = std::max(ymax, p.y);
  ymax = ymax > 0 ? ymax * 1.05 : 1;
  const Fronts f = fronts(r);
  auto panel = [&](double x0, bool gpus_axis) {
    double xmax = 0;
    for (const Point& p : pts) xmax = std::max(xmax, gpus_axis ? p.x_gpus : p.x_mem);
    xmax = xmax > 0 ? xmax * 1.05 : 1;
    auto X = [&](double v) { return x0 + v / xmax * panel_w; };
    auto Y = [&](double v) { return top + panel_h - v / ymax * panel_h; };
    out += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"none\" stroke=\"#999\"/>\n",
                       x0, top, panel_w, panel_h);
    for (int t = 0; t <= 5; ++t) {
      const double xv = xmax * t / 5, yv = ymax * t / 5;
      out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"middle\">{:.4g}</text>\n", X(xv),
                         top + panel_h + 16, xv);
      out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"end\">{:.3g}</text>\n", x0 - 6,
                         Y(yv) + 4, yv);
    }
    out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"12\" text-anchor=\"middle\">{}</text>\n",
                       x0 + panel_w / 2, top + panel_h + 40, gpus_axis ? "GPUs" : "peak memory per GPU (GB)");
    out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"12\" transform=\"rotate(-90 {:.1f} {:.1f})\" "
                       "text-anchor=\"middle\">tokens/s</text>\n",
                       x0 - 58, top + panel_h / 2, x0 - 58, top + panel_h / 2);
    if (!gpus_axis && r.memory_limit_bytes > 0) {
      const double lim = static_cast<double>(r.memory_limit_bytes) * 1e-9;
      if (lim < xmax) {
        out += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#c33\" "
                           "stroke-dasharray=\"4 3\"/>\n",
                           X(lim), top, top + panel_h);
      }
    }
    size_t k = 0;
    for (const Point& p : pts) {
      if (p.simulated) continue;
      if (k++ % stride != 0) continue;
      out += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"1.5\" fill=\"#bbb\"/>\n", X(gpus_axis ? p.x_gpus : p.x_mem),
                         Y(p.y));
    }
    for (const Point& p : pts) {
      if (!p.simulated) continue;
      out += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"none\" stroke=\"#1f5fa8\" stroke-width=\"1.5\"/>\n",
                         X(gpus_axis ? p.x_gpus : p.x_mem), Y(p.y));
    }
    const std::vector<size_t>& front = gpus_axis ? f.gpu_front : f.memory_front;
    std::string path;
    for (size_t id : front) {
      const Simulated& s = *r.candidates[id].simulated;
      const double xv = gpus_axis ? static_cast<double>(s.gpus) : static_cast<double>(s.peak_memory_bytes) * 1e-9;
      path += fmt::format("{}{:.1f},{:.1f}", path.empty() ? "" : " ", X(xv), Y(s.tokens_per_s));
    }
    if (!path.empty()) {
      out += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"#1f5fa8\" stroke-width=\"2\"/>\n", path);
    }
  };
  panel(left, false);
  if (two) panel(left + panel_w + 80, true);
  out += "</svg>\n";
  return out;
}

}  // namespace lacuna::search
