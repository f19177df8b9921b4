#include "sim/sweep/sweep_outputs.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/core/option_text.h"
#include "sim/core/error.h"
#include "sim/report/observers/bubble_accounting.h"
#include "sim/report/formats/csv.h"
#include "sim/sweep/line_plot_svg.h"
#include "sim/core/version.h"

namespace lacuna::sweep {
namespace {

using Json = nlohmann::ordered_json;

std::string network_name(run::NetworkMode m) { return m == run::NetworkMode::kFlow ? "flow" : "analytic"; }

// What the sweep ran, in words, for the table and the plot.
std::string settings_text(const SweepResult& r) {
  const SweepSettings& s = r.settings;
  std::string out = fmt::format("{} network, {}", network_name(s.network),
                                s.fold ? "folded (one rank per class simulated)" : "every rank simulated");
  if (s.calibration.enabled()) out += ", calibrated kernels from " + s.calibration.profile;
  if (s.ideal) out += ", ideal cluster";
  if (s.samples > 0) {
    out += fmt::format(", {} samples per point", s.samples);
    if (s.seed >= 0) out += fmt::format(" (seed {})", s.seed);
  } else if (s.seed >= 0) {
    out += fmt::format(", seed {}", s.seed);
  }
  return out;
}

// The axes the table gives a column: those with several values (one value
// is a setting the whole sweep shares, said once above the table); all of
// them when none has several.
std::vector<size_t> varied_axes(const Grid& g) {
  std::vector<size_t> out;
  for (size_t k = 0; k < g.axes().size(); ++k) {
    if (g.axes()[k].values.size() > 1) out.push_back(k);
  }
  if (out.empty()) {
    for (size_t k = 0; k < g.axes().size(); ++k) out.push_back(k);
  }
  return out;
}

std::string fields_text(const Grid& g) {
  std::string out;
  for (size_t k : varied_axes(g)) out += (out.empty() ? "" : g.zip() ? " + " : " × ") + g.axes()[k].field;
  return out;
}

// "parallel.dp=16, …" of the varied axes at `point`.
std::string varied_text(const Grid& g, size_t point) {
  const std::vector<size_t> idx = g.value_indices(point);
  std::string out;
  for (size_t k : varied_axes(g))
    out += fmt::format("{}{}={}", out.empty() ? "" : ", ", g.axes()[k].field, g.axes()[k].values[idx[k]]);
  return out;
}

// The MFU the points are ranked by: a sweep with an FP8 point compares every
// point on the BF16 peak (an FP8 run's own MFU is on the FP8 peak, twice as
// high, docs/fp8.md#mfu).
double ranked_mfu(const report::RunMetrics& m, bool fp8_set) { return fp8_set ? m.mfu_bf16_peak : m.mfu; }

// The point with the highest MFU among those that fit HBM (lowest index on
// ties); npos when none fits.
size_t best_point(const std::vector<report::RunMetrics>& points) {
  bool fp8_set = false;
  for (const report::RunMetrics& m : points) fp8_set |= m.fp8;
  size_t best = std::string::npos;
  for (size_t i = 0; i < points.size(); ++i) {
    if (!points[i].fits()) continue;
    if (best == std::string::npos || ranked_mfu(points[i], fp8_set) > ranked_mfu(points[best], fp8_set)) best = i;
  }
  return best;
}

// 1.234 M, 375.4 k: three or four significant digits for the table.
std::string si(double v) {
  if (v >= 1e12) return fmt::format("{:.2f} T", v / 1e12);
  if (v >= 1e9) return fmt::format("{:.2f} G", v / 1e9);
  if (v >= 1e6) return fmt::format("{:.2f} M", v / 1e6);
  if (v >= 1e3) return fmt::format("{:.1f} k", v / 1e3);
  return fmt::format("{:.1f}", v);
}

std::string percent(double fraction) { return fmt::format("{:.2f} %", fraction * 100); }
std::string ms(int64_t ns) { return fmt::format("{:.2f}", static_cast<double>(ns) / 1e6); }

bool integer_metric(const std::string& name) {
  return name == "num_gpus" || name == "over_capacity_ranks" || name == "samples";
}

// A swept value in the JSON: a number when it is one (4, 12.5), else the
// text as written ("ONE_F_ONE_B", "{tp: 2}").
Json field_value(const std::string& text) {
  if (!parse_number(text)) return Json(text);
  try {
    Json v = Json::parse(text);
    if (v.is_number()) return v;
  } catch (const nlohmann::json::exception&) {
  }
  return Json(text);
}

}  // namespace

size_t plot_axis(const Grid& grid) {
  for (size_t k = 0; k < grid.axes().size(); ++k) {
    if (grid.axes()[k].values.size() > 1) return k;
  }
  return 0;
}

report::MetricSet sweep_metric_set(const SweepResult& r) {
  report::MetricSet set{.multimodal = false, .samples = r.settings.samples > 0};
  for (const report::RunMetrics& m : r.points) set = set | report::metric_set(m);
  return set;
}

std::vector<std::string> plottable_metrics(bool samples) {
  return report::metric_names({.multimodal = true, .samples = samples, .moe = true, .fp8 = true});
}

void check_metric_names(const std::vector<std::string>& names, bool samples) {
  const std::vector<std::string> known = plottable_metrics(samples);
  for (const std::string& n : names) {
    if (std::find(known.begin(), known.end(), n) != known.end()) continue;
    std::string list;
    for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
    const std::vector<std::string> with_samples = plottable_metrics(true);
    const bool needs_samples = !samples && std::find(with_samples.begin(), with_samples.end(), n) != with_samples.end();
    throw Error(SourceLocation{option_ref("metric", n), 0, 0, {}},
                needs_samples ? "this statistic needs ‹samples K›" : "no metric of that name",
                needs_samples ? "add ‹samples K›, or plot " + list : "choose one of " + list);
  }
}

std::string sweep_table(const SweepResult& r) {
  const Grid& g = r.grid;
  const report::MetricSet set = sweep_metric_set(r);
  // The bubble categories worth a column: shown for this program and not
  // zero at every point.
  std::vector<report::Bubble> bubbles;
  for (report::Bubble b : report::kAllBubbles) {
    if (!report::bubble_shown(b, set.multimodal, set.moe)) continue;
    const bool any = std::any_of(r.points.begin(), r.points.end(), [&](const report::RunMetrics& m) {
      return m.bubble_median_ns[static_cast<size_t>(b)] != 0;
    });
    if (any) bubbles.push_back(b);
  }
  const std::vector<size_t> varied = varied_axes(g);
  std::string out = fmt::format(
      "lacuna sweep: {} — {} points over {} ({})\n  {}\n", r.scenario_name, g.size(), fields_text(g),
      g.zip() ? "lists advanced together" : "every combination, the last field varying fastest", settings_text(r));
  std::string fixed;
  for (size_t k = 0; k < g.axes().size(); ++k) {
    if (std::find(varied.begin(), varied.end(), k) == varied.end()) {
      fixed += fmt::format("{}{}={}", fixed.empty() ? "" : ", ", g.axes()[k].field, g.axes()[k].values.front());
    }
  }
  if (!fixed.empty()) out += "  at every point: " + fixed + "\n";
  out += "\n";
  std::vector<std::string> header = {"#"};
  for (size_t k : varied) header.push_back(g.axes()[k].field);
  for (const char* h : {"iteration (s)", "tokens/s", "TFLOP/s per GPU", "MFU", "HFU"}) header.push_back(h);
  if (set.fp8) header.push_back("MFU on BF16 peak");
  header.push_back("peak memory (GB)");
  if (set.samples) {
    header.push_back("iteration mean (s)");
    header.push_back("iteration p99 (s)");
  }
  for (report::Bubble b : bubbles) header.push_back(std::string(report::bubble_key(b)) + " (ms)");
  header.push_back("bubbles total (ms)");
  auto line = [](const std::vector<std::string>& cells) {
    std::string l = "|";
    for (const std::string& c : cells) l += " " + c + " |";
    return l + "\n";
  };
  out += line(header);
  out += line(std::vector<std::string>(header.size(), "---"));
  bool any_over = false;
  for (size_t p = 0; p < r.points.size(); ++p) {
    const report::RunMetrics& m = r.points[p];
    const std::vector<size_t> idx = g.value_indices(p);
    std::vector<std::string> row = {std::to_string(p + 1)};
    for (size_t k : varied) row.push_back(g.axes()[k].values[idx[k]]);
    row.push_back(fmt::format("{:.4f}", m.iteration_s()));
    row.push_back(si(m.tokens_per_s));
    row.push_back(m.tflops_per_gpu >= 1 ? fmt::format("{:.1f}", m.tflops_per_gpu)
                                        : fmt::format("{:.4f}", m.tflops_per_gpu));
    row.push_back(percent(m.mfu));
    row.push_back(percent(m.hfu));
    if (set.fp8) row.push_back(percent(m.mfu_bf16_peak));
    row.push_back(fmt::format("{:.2f}{}", static_cast<double>(m.peak_memory_bytes) / 1e9, m.fits() ? "" : " !"));
    any_over |= !m.fits();
    if (set.samples) {
      row.push_back(fmt::format("{:.4f}", m.iteration_s_samples.mean));
      row.push_back(fmt::format("{:.4f}", m.iteration_s_samples.p99));
    }
    for (report::Bubble b : bubbles) row.push_back(ms(m.bubble_median_ns[static_cast<size_t>(b)]));
    row.push_back(ms(m.bubble_total_median_ns));
    out += line(row);
  }
  out += "\n";
  out += "  bubbles: median per rank; peak memory: the highest rank's\n";
  const size_t best = best_point(r.points);
  if (best != std::string::npos) {
    if (set.fp8) {
      out += fmt::format("  best MFU  point {} ({}): {} on the BF16 peak\n", best + 1, varied_text(g, best),
                         percent(r.points[best].mfu_bf16_peak));
    } else {
      out += fmt::format("  best MFU  point {} ({}): {}\n", best + 1, varied_text(g, best), percent(r.points[best].mfu));
    }
  } else {
    out += "  best MFU  none: every point exceeds HBM\n";
  }
  if (any_over) {
    out +=
        "  !         peak memory over the GPU's HBM on some ranks: that point cannot run as configured "
        "(docs/memory-model.md#feasibility)\n";
  }
  return out;
}

std::string sweep_csv(const SweepResult& r) {
  const report::MetricSet set = sweep_metric_set(r);
  std::vector<std::string> header = {"point"};
  for (const Axis& a : r.grid.axes()) header.push_back(a.field);
  for (const std::string& n : report::metric_names(set)) header.push_back(n);
  std::string out = report::csv::row(header);
  for (size_t p = 0; p < r.points.size(); ++p) {
    const std::vector<size_t> idx = r.grid.value_indices(p);
    std::vector<std::string> row = {std::to_string(p + 1)};
    for (size_t k = 0; k < r.grid.axes().size(); ++k) row.push_back(r.grid.axes()[k].values[idx[k]]);
    for (const report::Metric& m : report::named_metrics(r.points[p], set)) row.push_back(report::csv::number(m.value));
    out += report::csv::row(row);
  }
  return out;
}

std::string sweep_json(const SweepResult& r) {
  const Grid& g = r.grid;
  const SweepSettings& s = r.settings;
  const report::MetricSet set = sweep_metric_set(r);
  Json fields = Json::array();
  for (const Axis& a : g.axes()) {
    Json values = Json::array();
    for (const std::string& v : a.values) values.push_back(field_value(v));
    fields.push_back(Json{{"field", a.field}, {"values", std::move(values)}});
  }
  Json settings;
  settings["fields"] = std::move(fields);
  settings["zip"] = g.zip();
  settings["points"] = g.size();
  settings["mode"] = s.fold ? "folded" : "full";
  settings["network"] = network_name(s.network);
  settings["calibration"] = s.calibration.enabled() ? Json(s.calibration.profile) : Json(nullptr);
  settings["scale_down"] = s.scale_down;
  settings["ideal"] = s.ideal;
  settings["samples"] = s.samples;
  settings["seed"] = s.seed >= 0 ? Json(s.seed) : Json(nullptr);

  std::string out = "{\n";
  out += " \"lacuna_version\": " + Json(lacuna_version()).dump() + ",\n";
  out += " \"scenario\": " + Json(r.scenario_name).dump() + ",\n";
  out += " \"scenario_file\": " + Json(s.scenario).dump() + ",\n";
  out += " \"settings\": " + settings.dump() + ",\n";
  out += " \"points\": [";
  for (size_t p = 0; p < r.points.size(); ++p) {
    const std::vector<size_t> idx = g.value_indices(p);
    Json point;
    point["point"] = p + 1;
    Json f;
    for (size_t k = 0; k < g.axes().size(); ++k) f[g.axes()[k].field] = field_value(g.axes()[k].values[idx[k]]);
    point["fields"] = std::move(f);
    point["fits"] = r.points[p].fits();
    Json metrics;
    for (const report::Metric& m : report::named_metrics(r.points[p], set)) {
      metrics[m.name] = integer_metric(m.name) ? Json(static_cast<int64_t>(m.value)) : Json(m.value);
    }
    point["metrics"] = std::move(metrics);
    out += (p == 0 ? "\n  " : ",\n  ") + point.dump();
  }
  out += r.points.empty() ? "]\n}\n" : "\n ]\n}\n";
  return out;
}

std::string sweep_svg(const SweepResult& r, const std::vector<std::string>& metrics) {
  const Grid& g = r.grid;
  const size_t x_axis = plot_axis(g);
  const Axis& xa = g.axes()[x_axis];
  LinePlot plot;
  plot.title = fmt::format("lacuna sweep: {}", r.scenario_name);
  plot.x_label = xa.field;
  std::vector<size_t> series_of(g.size()), x_of(g.size());
  std::vector<std::string> series_labels;
  if (g.zip()) {
    // One line; point p is x position p (a zipped list may repeat a value).
    series_labels.push_back("");
    for (size_t p = 0; p < g.size(); ++p) {
      x_of[p] = p;
      plot.x_text.push_back(xa.values[g.value_indices(p)[x_axis]]);
    }
    std::string others;
    for (size_t k = 0; k < g.axes().size(); ++k) {
      if (k != x_axis && g.axes()[k].values.size() > 1) others += (others.empty() ? "" : ", ") + g.axes()[k].field;
    }
    plot.subtitle = fmt::format("{} points, {} advanced together{}; {}", g.size(), xa.field,
                                others.empty() ? "" : " with " + others, settings_text(r));
  } else {
    // One line per combination of the other fields, in the order of their
    // first point.
    plot.x_text = xa.values;
    std::map<std::vector<size_t>, size_t> index;
    for (size_t p = 0; p < g.size(); ++p) {
      std::vector<size_t> key = g.value_indices(p);
      x_of[p] = key[x_axis];
      key.erase(key.begin() + static_cast<std::ptrdiff_t>(x_axis));
      auto [it, added] = index.emplace(key, series_labels.size());
      if (added) {
        const std::vector<size_t> idx = g.value_indices(p);
        std::string label;
        for (size_t k = 0; k < g.axes().size(); ++k) {
          if (k == x_axis || g.axes()[k].values.size() == 1) continue;
          label += fmt::format("{}{}={}", label.empty() ? "" : ", ", g.axes()[k].field, g.axes()[k].values[idx[k]]);
        }
        series_labels.push_back(label);
      }
      series_of[p] = it->second;
    }
    plot.subtitle =
        fmt::format("{} points; x: {}{}; {}", g.size(), xa.field,
                    series_labels.size() > 1 ? ", one line per combination of the other fields" : "", settings_text(r));
  }
  std::vector<double> xs;
  for (const std::string& v : plot.x_text) {
    if (const auto x = parse_number(v)) xs.push_back(*x);
  }
  if (xs.size() == plot.x_text.size()) plot.x_values = xs;
  // Every plottable metric (plottable_metrics), MoE and FP8 ones included.
  const report::MetricSet all{.multimodal = true, .samples = r.settings.samples > 0, .moe = true, .fp8 = true};
  for (const std::string& name : metrics) {
    PlotPanel panel;
    panel.y_label = name;
    for (const std::string& label : series_labels)
      panel.series.push_back({label, std::vector<std::optional<double>>(plot.x_text.size())});
    for (size_t p = 0; p < r.points.size(); ++p) {
      for (const report::Metric& m : report::named_metrics(r.points[p], all)) {
        if (m.name == name) panel.series[series_of[p]].y[x_of[p]] = m.value;
      }
    }
    plot.panels.push_back(std::move(panel));
  }
  return render_line_plot(plot);
}

}  // namespace lacuna::sweep
