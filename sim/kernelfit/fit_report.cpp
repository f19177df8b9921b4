#include "sim/kernelfit/fit_report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/scenario/scenario.h"

namespace lacuna::kernelfit {
namespace {

const char* dtype_name(scenario::Precision p) { return p == scenario::FP16 ? "fp16" : p == scenario::FP8 ? "fp8" : "bf16"; }

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) t += ' ';
    t += std::to_string(s[i]);
  }
  return t;
}

std::string pct(double e) { return fmt::format("{:+.1f} %", e * 100); }
std::string abs_pct(double e) { return fmt::format("{:.1f} %", e * 100); }

using Key = std::tuple<int, int, int>;  // class, pass, dtype

Key key_of(const MeasuredKernel& k) {
  return {static_cast<int>(k.op_class), static_cast<int>(k.pass), static_cast<int>(k.dtype)};
}

std::string key_text(const Key& k) {
  return fmt::format("{} {} {}", ir::OpClass_Name(static_cast<ir::OpClass>(std::get<0>(k))),
                     pass_name(static_cast<Pass>(std::get<1>(k))),
                     dtype_name(static_cast<scenario::Precision>(std::get<2>(k))));
}

double eff_flops(const scenario::GpuSpec& g, const std::string& key) {
  const auto it = g.efficiency().find(key);
  return it == g.efficiency().end() ? NAN : it->second.flops();
}
double eff_memory(const scenario::GpuSpec& g, const std::string& key) {
  auto it = g.efficiency().find(key);
  if (it == g.efficiency().end() || !it->second.has_memory()) it = g.efficiency().find("DEFAULT");
  return it == g.efficiency().end() ? NAN : it->second.memory();
}

}  // namespace

std::string table_preset(const std::vector<MeasuredKernel>& rows, const std::string& requested) {
  std::string preset = requested;
  for (const MeasuredKernel& r : rows) {
    if (preset.empty()) preset = r.gpu;
    if (r.gpu != preset)
      throw Error(SourceLocation{r.file, r.line, 1, "gpu"},
                  fmt::format("a kernel measured on {} in a fit of {}", r.gpu, preset),
                  "fit one GPU at a time: give only that GPU's tables");
  }
  if (preset.empty()) throw Error("no measured kernels in the tables");
  const std::vector<std::string> names = scenario::hardware_preset_names();
  if (std::find(names.begin(), names.end(), preset) == names.end())
    throw Error(SourceLocation{rows.empty() ? "" : rows.front().file, rows.empty() ? 0 : rows.front().line, 1, "gpu"},
                fmt::format("\"{}\" is no hardware preset", preset), "see `lacuna presets`");
  return preset;
}

std::string params_pbtxt(const FitParams& p) {
  std::string s;
  if (p.gemm_flops) s += fmt::format("efficiency {{ key: \"GEMM\" value {{ flops: {:.2f} }} }}\n", *p.gemm_flops);
  if (p.gemm_fp8_flops)
    s += fmt::format("efficiency {{ key: \"GEMM_FP8\" value {{ flops: {:.2f} }} }}\n", *p.gemm_fp8_flops);
  if (p.attention_flops)
    s += fmt::format("efficiency {{ key: \"ATTENTION\" value {{ flops: {:.2f} }} }}\n", *p.attention_flops);
  for (const auto& [c, v] : p.memory)
    s += fmt::format("efficiency {{ key: \"{}\" value {{ memory: {:.2f} }} }}\n", ir::OpClass_Name(c), v);
  if (p.gemm_k_overhead || p.gemm_max_split_k || p.attention_kv_overhead) {
    s += "shape_model {";
    if (p.gemm_k_overhead) s += fmt::format(" gemm_k_overhead: {:.0f}", *p.gemm_k_overhead);
    if (p.gemm_max_split_k) s += fmt::format(" gemm_max_split_k: {}", *p.gemm_max_split_k);
    if (p.attention_kv_overhead) s += fmt::format(" attention_kv_overhead: {:.0f}", *p.attention_kv_overhead);
    s += " }\n";
  }
  return s;
}

std::string format_report(const FitReport& r, const std::string& preset, const std::vector<std::string>& tables) {
  std::string out;
  out += fmt::format("Kernel efficiency fit: preset {} ({}), {} measured kernels from {}\n", preset, r.base.name(),
                     r.scored.size(), fmt::join(tables, ", "));
  out += fmt::format("Cross-validation: {} ({})\n\n",
                     r.folds_are_groups ? fmt::format("leave one group out, {} groups", r.folds.size())
                                        : "5 folds by row order (fewer than 3 groups)",
                     fmt::join(r.folds, ", "));

  const int fitted_rows = static_cast<int>(std::count_if(r.scored.begin(), r.scored.end(), [&](const ScoredRow& s) {
    return s.measured_s * 1e6 >= r.min_fit_us;
  }));
  out += fmt::format("Fitted on the {} kernels measured at ≥ {:g} µs (ten kernel overheads); every kernel is scored.\n\n",
                     fitted_rows, r.min_fit_us);
  out += "Parameter                          preset    fitted\n";
  const FitParams& p = r.params;
  auto line = [&](const std::string& name, double before, std::optional<double> after, const char* f) {
    if (!after) return;
    out += fmt::format("{:<34} {:>6}    {:>6}\n", name, fmt::format(fmt::runtime(f), before),
                       fmt::format(fmt::runtime(f), *after));
  };
  line("GEMM flops efficiency", eff_flops(r.base, "GEMM"), p.gemm_flops, "{:.2f}");
  line("GEMM K overhead (K elements)", r.base.shape_model().gemm_k_overhead(), p.gemm_k_overhead, "{:.0f}");
  if (p.gemm_max_split_k)
    line("GEMM split-K limit", static_cast<double>(r.base.shape_model().gemm_max_split_k()),
         static_cast<double>(*p.gemm_max_split_k), "{:.0f}");
  line("GEMM_FP8 flops efficiency", eff_flops(r.base, "GEMM_FP8"), p.gemm_fp8_flops, "{:.2f}");
  line("ATTENTION flops efficiency", eff_flops(r.base, "ATTENTION"), p.attention_flops, "{:.2f}");
  line("attention K/V overhead (keys)", r.base.shape_model().attention_kv_overhead(), p.attention_kv_overhead,
       "{:.0f}");
  for (const auto& [c, v] : p.memory)
    line(fmt::format("{} memory efficiency", ir::OpClass_Name(c)), eff_memory(r.base, ir::OpClass_Name(c)), v,
         "{:.2f}");

  out += "\nError per kernel class (predicted / measured − 1; mean |error| and bias, + = predicted slower)\n";
  out += "| class pass dtype | rows | preset: mean | preset: bias | fitted: mean | fitted: bias | held out: mean "
         "| held out: bias | held out: max |\n";
  out += "|---|---|---|---|---|---|---|---|---|\n";
  std::set<Key> keys;
  for (const ScoredRow& s : r.scored) keys.insert(key_of(*s.row));
  auto row_of = [&](const std::string& name, const auto& keep) {
    const ErrorStats b = stats_of(r, Which::kBefore, keep), f = stats_of(r, Which::kFitted, keep),
                     h = stats_of(r, Which::kHeldOut, keep);
    out += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", name, b.rows, abs_pct(b.mean_abs),
                       pct(b.bias), abs_pct(f.mean_abs), pct(f.bias), abs_pct(h.mean_abs), pct(h.bias),
                       abs_pct(h.max_abs));
  };
  for (const Key& k : keys) row_of(key_text(k), [&](const MeasuredKernel& m) { return key_of(m) == k; });
  row_of("all", [](const MeasuredKernel&) { return true; });
  row_of(fmt::format("all ≥ {:g} µs", r.min_fit_us),
         [&](const MeasuredKernel& m) { return m.time_us && *m.time_us >= r.min_fit_us; });

  out += "\nFitted parameters as a GpuSpec fragment:\n" + params_pbtxt(p);
  return out;
}

std::string report_csv(const FitReport& r) {
  std::string out = "gpu,class,pass,dtype,shape,group,label,measured_us,before_us,fitted_us,held_out_us\n";
  for (const ScoredRow& s : r.scored) {
    const MeasuredKernel& k = *s.row;
    out += fmt::format("{},{},{},{},{},{},{},{:.3f},{:.3f},{:.3f},{:.3f}\n", k.gpu, ir::OpClass_Name(k.op_class),
                       pass_name(k.pass), dtype_name(k.dtype), shape_text(k.shape), k.group, k.label,
                       s.measured_s * 1e6, s.before_s * 1e6, s.fitted_s * 1e6, s.held_out_s * 1e6);
  }
  return out;
}

std::string report_svg(const FitReport& r, const std::string& preset) {
  // One panel per class: x = measured, y = predicted (µs, log10), the
  // diagonal, ±10 % lines; circles held out, crosses before the fit.
  std::vector<ir::OpClass> classes;
  for (const ScoredRow& s : r.scored)
    if (std::find(classes.begin(), classes.end(), s.row->op_class) == classes.end()) classes.push_back(s.row->op_class);
  std::sort(classes.begin(), classes.end());
  const int cols = std::min<int>(3, static_cast<int>(classes.size()));
  const int rows = (static_cast<int>(classes.size()) + cols - 1) / std::max(cols, 1);
  const double w = 300, h = 300, m = 50;
  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" font-family=\"sans-serif\" "
      "font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"10\" y=\"18\" font-size=\"14\">{}: predicted vs measured kernel time (µs, log scale); "
      "o held out (cross-validated fit), x preset before the fit; lines: equal, ±10 %</text>\n",
      cols * (w + m) + m, rows * (h + m) + 2 * m, preset);
  for (size_t ci = 0; ci < classes.size(); ++ci) {
    const double x0 = m + static_cast<double>(ci % cols) * (w + m), y0 = 2 * m + static_cast<double>(ci / cols) * (h + m);
    double lo = INFINITY, hi = 0;
    for (const ScoredRow& s : r.scored) {
      if (s.row->op_class != classes[ci]) continue;
      for (double v : {s.measured_s, s.before_s, s.held_out_s}) {
        lo = std::min(lo, v * 1e6);
        hi = std::max(hi, v * 1e6);
      }
    }
    const double l0 = std::floor(std::log10(lo)), l1 = std::ceil(std::log10(hi)) + (lo == hi ? 1 : 0);
    auto px = [&](double us) { return x0 + (std::log10(us) - l0) / (l1 - l0) * w; };
    auto py = [&](double us) { return y0 + h - (std::log10(us) - l0) / (l1 - l0) * h; };
    out += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.0f}\" height=\"{:.0f}\" fill=\"none\" "
                       "stroke=\"#888\"/>\n<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n",
                       x0, y0, w, h, x0, y0 - 6, ir::OpClass_Name(classes[ci]));
    for (double dec = l0; dec <= l1; dec += 1)
      out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"9\">{:g}</text>\n", px(std::pow(10, dec)) - 6,
                         y0 + h + 12, std::pow(10, dec));
    const double a = std::pow(10, l0), b = std::pow(10, l1);
    out += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"black\"/>\n", px(a),
                       py(a), px(b), py(b));
    for (double f : {0.9, 1.1})
      out += fmt::format(
          "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#bbb\" stroke-dasharray=\"3,3\"/>\n",
          px(a), py(a * f), px(b / 1.1), py(b / 1.1 * f));
    for (const ScoredRow& s : r.scored) {
      if (s.row->op_class != classes[ci]) continue;
      const double x = px(s.measured_s * 1e6);
      const double yb = py(s.before_s * 1e6), yh = py(s.held_out_s * 1e6);
      out += fmt::format("<path d=\"M{:.1f},{:.1f}l4,4m0,-4l-4,4\" stroke=\"#d62728\" stroke-width=\"0.7\"/>\n",
                         x - 2, yb - 2);
      out += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2\" fill=\"none\" stroke=\"#1f77b4\"/>\n", x, yh);
    }
  }
  out += "</svg>\n";
  return out;
}

}  // namespace lacuna::kernelfit
