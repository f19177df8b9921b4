#include "sim/kernelfit/efficiency_fit.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include "sim/core/error.h"
#include "sim/cost/roofline.h"
#include "sim/kernelfit/table_kernel.h"

namespace lacuna::kernelfit {
namespace {

// Ranges searched. An efficiency below 0.05 of peak is no fit but a sign of
// a wrong formula; overheads are in K (GEMM) or keys (attention) per tile.
constexpr double kEffLo = 0.05, kEffHi = 1.0;
// Golden-section steps: an efficiency is searched by arithmetic (cheap, to
// 0.618^48 ≈ 1e-10 of its range); an overhead re-times every row per step
// (to 0.618^24 ≈ 1e-5 of the interval between two grid points).
constexpr int kEffSteps = 48;
// Split-K limits tried (cuBLASLt's tuning sample tries 2–32).
constexpr int64_t kSplitKCandidates[] = {1, 2, 4, 8, 16};
constexpr int kOverheadSteps = 24;

double golden_min(double lo, double hi, const std::function<double(double)>& f, int steps = kEffSteps) {
  const double r = (std::sqrt(5.0) - 1) / 2;
  double a = lo, b = hi;
  double c = b - r * (b - a), d = a + r * (b - a);
  double fc = f(c), fd = f(d);
  for (int i = 0; i < steps; ++i) {
    if (fc <= fd) {
      b = d;
      d = c;
      fd = fc;
      c = b - r * (b - a);
      fc = f(c);
    } else {
      a = c;
      c = d;
      fc = fd;
      d = a + r * (b - a);
      fd = f(d);
    }
  }
  return (a + b) / 2;
}

// The grid of overheads tried before refining: 0 and 2^(i/4) for i = 8..48
// (4 … 4096).
std::vector<double> overhead_grid() {
  std::vector<double> g{0};
  for (int i = 8; i <= 48; ++i) g.push_back(std::pow(2.0, i / 4.0));
  return g;
}

scenario::Precision program_precision(const MeasuredKernel& r) {
  return r.dtype == scenario::FP16 ? scenario::FP16 : scenario::BF16;  // FP8: a BF16 program's FP8 GEMM
}

// The rows with a time, compiled once.
struct Data {
  std::vector<const MeasuredKernel*> rows;
  std::vector<ir::Compute> ops;
  std::vector<double> measured_s;
};

Data data_of(const std::vector<MeasuredKernel>& rows) {
  Data d;
  for (const MeasuredKernel& r : rows) {
    if (!r.time_us) continue;
    d.rows.push_back(&r);
    d.ops.push_back(kernel_of(r));
    d.measured_s.push_back(*r.time_us * 1e-6);
  }
  return d;
}

// Times of rows under one GPU, one roofline per program precision.
class Timer {
 public:
  explicit Timer(const scenario::GpuSpec& gpu) : gpu_(gpu) {}
  double seconds(const MeasuredKernel& r, const ir::Compute& op) {
    const scenario::Precision p = program_precision(r);
    auto it = models_.find(p);
    if (it == models_.end()) it = models_.emplace(p, cost::RooflineModel(gpu_, p)).first;
    try {
      return it->second.time(op).seconds();
    } catch (const Error& e) {
      throw Error(SourceLocation{r.file, r.line, 0, "class"}, e.what());
    }
  }

 private:
  scenario::GpuSpec gpu_;
  std::map<scenario::Precision, cost::RooflineModel> models_;
};

// A row's time as max(compute / eff, memory) + overhead, the roofline's
// composition, with the pieces taken from the roofline itself: `compute` at
// the fitted class's efficiency 1 with HBM made free, `memory` with every
// peak made free, both without the overhead. Lets an efficiency be searched
// by arithmetic; the reported times come from the roofline whole.
struct Pieces {
  double compute_s = 0;  // at efficiency 1
  double memory_s = 0;
  double overhead_s = 0;
  double at(double eff_flops, double eff_memory_scale = 1) const {
    return std::max(compute_s / eff_flops, memory_s / eff_memory_scale) + overhead_s;
  }
};

scenario::GpuSpec free_memory(scenario::GpuSpec g) {
  g.set_hbm_bandwidth_gb_per_s(g.hbm_bandwidth_gb_per_s() * 1e9);
  g.set_kernel_overhead_us(0);
  return g;
}

scenario::GpuSpec free_compute(scenario::GpuSpec g) {
  if (g.has_peak_bf16_tflops()) g.set_peak_bf16_tflops(g.peak_bf16_tflops() * 1e9);
  if (g.has_peak_fp16_tflops()) g.set_peak_fp16_tflops(g.peak_fp16_tflops() * 1e9);
  if (g.has_peak_fp8_tflops()) g.set_peak_fp8_tflops(g.peak_fp8_tflops() * 1e9);
  if (g.has_peak_fp4_tflops()) g.set_peak_fp4_tflops(g.peak_fp4_tflops() * 1e9);
  if (g.has_peak_tf32_tflops()) g.set_peak_tf32_tflops(g.peak_tf32_tflops() * 1e9);
  if (g.has_peak_fp32_tflops()) g.set_peak_fp32_tflops(g.peak_fp32_tflops() * 1e9);
  g.set_kernel_overhead_us(0);
  return g;
}

void set_flops(scenario::GpuSpec& g, const std::string& key, double v) { (*g.mutable_efficiency())[key].set_flops(v); }

std::vector<Pieces> pieces(const scenario::GpuSpec& gpu, const Data& d, const std::vector<size_t>& idx,
                           const std::string& unit_key) {
  scenario::GpuSpec unit = gpu;
  if (!unit_key.empty()) set_flops(unit, unit_key, 1.0);
  Timer compute(free_memory(unit)), memory(free_compute(gpu));
  const double overhead = gpu.kernel_overhead_us() * 1e-6;
  std::vector<Pieces> out;
  out.reserve(idx.size());
  for (size_t i : idx)
    out.push_back({compute.seconds(*d.rows[i], d.ops[i]), memory.seconds(*d.rows[i], d.ops[i]), overhead});
  return out;
}

double loss(const std::vector<Pieces>& p, const Data& d, const std::vector<size_t>& idx, double eff_flops,
            double mem_scale = 1) {
  double s = 0;
  for (size_t j = 0; j < idx.size(); ++j) {
    const double e = std::log(p[j].at(eff_flops, mem_scale) / d.measured_s[idx[j]]);
    s += e * e;
  }
  return s;
}

// The best efficiency for fixed pieces, and its loss.
std::pair<double, double> best_eff(const std::vector<Pieces>& p, const Data& d, const std::vector<size_t>& idx) {
  const double e = golden_min(kEffLo, kEffHi, [&](double x) { return loss(p, d, idx, x); });
  return {e, loss(p, d, idx, e)};
}

// Efficiency and a shape-model overhead together: the grid, then a golden
// search between the best point's neighbours.
struct EffAndOverhead {
  double eff = 1, overhead = 0;
};

EffAndOverhead fit_with_overhead(const scenario::GpuSpec& gpu, const Data& d, const std::vector<size_t>& idx,
                                 const std::string& key,
                                 const std::function<void(scenario::GpuSpec&, double)>& set_overhead) {
  const std::vector<double> grid = overhead_grid();
  auto loss_at = [&](double o, double* eff) {
    scenario::GpuSpec g = gpu;
    set_overhead(g, o);
    const auto [e, l] = best_eff(pieces(g, d, idx, key), d, idx);
    if (eff) *eff = e;
    return l;
  };
  size_t best = 0;
  double best_loss = INFINITY;
  for (size_t i = 0; i < grid.size(); ++i) {
    const double l = loss_at(grid[i], nullptr);
    if (l < best_loss) {
      best_loss = l;
      best = i;
    }
  }
  const double lo = grid[best == 0 ? 0 : best - 1], hi = grid[std::min(best + 1, grid.size() - 1)];
  EffAndOverhead r;
  r.overhead = golden_min(lo, hi, [&](double o) { return loss_at(o, nullptr); }, kOverheadSteps);
  // The grid point itself when the refinement found nothing better (a flat
  // objective): never worse than the grid.
  if (loss_at(grid[best], nullptr) < loss_at(r.overhead, nullptr)) r.overhead = grid[best];
  loss_at(r.overhead, &r.eff);
  return r;
}

std::vector<size_t> select(const Data& d, const std::vector<size_t>& from,
                           const std::function<bool(const MeasuredKernel&)>& keep) {
  std::vector<size_t> out;
  for (size_t i : from)
    if (keep(*d.rows[i])) out.push_back(i);
  return out;
}

double min_fit_us(const scenario::GpuSpec& base, const FitOptions& o) {
  return o.min_fit_us >= 0 ? o.min_fit_us : 10 * base.kernel_overhead_us();
}

FitParams fit_rows(const scenario::GpuSpec& base, const Data& d, const std::vector<size_t>& all,
                   const FitOptions& o) {
  const double floor_s = min_fit_us(base, o) * 1e-6;
  const std::vector<size_t> idx = select(d, all, [&](const MeasuredKernel& r) { return *r.time_us * 1e-6 >= floor_s; });
  FitParams p;
  scenario::GpuSpec gpu = base;
  if (o.memory) {
    std::set<ir::OpClass> classes;
    for (size_t i : idx)
      if (d.ops[i].flops() == 0) classes.insert(d.rows[i]->op_class);  // memory-bound: no FLOPs
    for (ir::OpClass c : classes) {
      const std::vector<size_t> rows = select(d, idx, [&](const MeasuredKernel& r) { return r.op_class == c; });
      // Memory time at efficiency 1 (the class's memory efficiency set to 1).
      scenario::GpuSpec unit = gpu;
      (*unit.mutable_efficiency())[ir::OpClass_Name(c)].set_memory(1.0);
      std::vector<Pieces> pc = pieces(unit, d, rows, "");
      const double e = golden_min(kEffLo, kEffHi, [&](double x) { return loss(pc, d, rows, 1.0, x); });
      p.memory[c] = e;
    }
    gpu = apply(base, p);
  }
  if (o.gemm) {
    const std::vector<size_t> rows = select(
        d, idx, [](const MeasuredKernel& r) { return r.op_class == ir::GEMM && r.dtype != scenario::FP8; });
    if (!rows.empty()) {
      // The split-K limit is discrete: each candidate gets its own fit of
      // the efficiency and the K overhead; the least loss wins (ties: the
      // smaller split).
      double best_loss = INFINITY;
      for (int64_t split : kSplitKCandidates) {
        scenario::GpuSpec g = gpu;
        g.mutable_shape_model()->set_gemm_max_split_k(split);
        const EffAndOverhead f = fit_with_overhead(
            g, d, rows, "GEMM", [](scenario::GpuSpec& x, double v) { x.mutable_shape_model()->set_gemm_k_overhead(v); });
        g.mutable_shape_model()->set_gemm_k_overhead(f.overhead);
        const double l = best_eff(pieces(g, d, rows, "GEMM"), d, rows).second;
        if (l < best_loss) {
          best_loss = l;
          p.gemm_flops = f.eff;
          p.gemm_k_overhead = f.overhead;
          p.gemm_max_split_k = split;
        }
      }
      gpu = apply(base, p);
    }
    const std::vector<size_t> fp8 =
        select(d, idx, [](const MeasuredKernel& r) { return r.op_class == ir::GEMM && r.dtype == scenario::FP8; });
    if (!fp8.empty()) {
      p.gemm_fp8_flops = best_eff(pieces(gpu, d, fp8, "GEMM_FP8"), d, fp8).first;
      gpu = apply(base, p);
    }
  }
  if (o.attention) {
    const std::vector<size_t> rows = select(d, idx, [](const MeasuredKernel& r) { return r.op_class == ir::ATTENTION; });
    if (!rows.empty()) {
      const EffAndOverhead f =
          fit_with_overhead(gpu, d, rows, "ATTENTION", [](scenario::GpuSpec& g, double v) {
            g.mutable_shape_model()->set_attention_kv_overhead(v);
          });
      p.attention_flops = f.eff;
      p.attention_kv_overhead = f.overhead;
    }
  }
  return p;
}

}  // namespace

scenario::GpuSpec apply(const scenario::GpuSpec& base, const FitParams& p) {
  scenario::GpuSpec g = base;
  if (p.gemm_flops) set_flops(g, "GEMM", *p.gemm_flops);
  if (p.gemm_k_overhead) g.mutable_shape_model()->set_gemm_k_overhead(*p.gemm_k_overhead);
  if (p.gemm_max_split_k) g.mutable_shape_model()->set_gemm_max_split_k(*p.gemm_max_split_k);
  if (p.gemm_fp8_flops) set_flops(g, "GEMM_FP8", *p.gemm_fp8_flops);
  if (p.attention_flops) set_flops(g, "ATTENTION", *p.attention_flops);
  if (p.attention_kv_overhead) g.mutable_shape_model()->set_attention_kv_overhead(*p.attention_kv_overhead);
  for (const auto& [c, v] : p.memory) (*g.mutable_efficiency())[ir::OpClass_Name(c)].set_memory(v);
  return g;
}

FitParams fit(const scenario::GpuSpec& base, const std::vector<MeasuredKernel>& rows, const FitOptions& options) {
  const Data d = data_of(rows);
  std::vector<size_t> all(d.rows.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  return fit_rows(base, d, all, options);
}

double predict_s(const scenario::GpuSpec& gpu, const MeasuredKernel& row) {
  return Timer(gpu).seconds(row, kernel_of(row));
}

FitReport fit_and_validate(const scenario::GpuSpec& base, const std::vector<MeasuredKernel>& rows,
                           const FitOptions& options) {
  const Data d = data_of(rows);
  FitReport rep;
  rep.base = base;
  std::vector<size_t> all(d.rows.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  rep.params = fit_rows(base, d, all, options);
  rep.min_fit_us = min_fit_us(base, options);
  rep.fitted = apply(base, rep.params);

  // Folds: the groups (first appearance order) when there are at least three.
  std::vector<int> fold_of(d.rows.size());
  {
    std::vector<std::string> groups;
    for (const MeasuredKernel* r : d.rows)
      if (std::find(groups.begin(), groups.end(), r->group) == groups.end()) groups.push_back(r->group);
    rep.folds_are_groups = groups.size() >= 3;
    if (rep.folds_are_groups) {
      rep.folds = groups;
      for (size_t i = 0; i < d.rows.size(); ++i)
        fold_of[i] = static_cast<int>(std::find(groups.begin(), groups.end(), d.rows[i]->group) - groups.begin());
    } else {
      rep.folds = {"fold 1", "fold 2", "fold 3", "fold 4", "fold 5"};
      for (size_t i = 0; i < d.rows.size(); ++i) fold_of[i] = static_cast<int>(i % 5);
    }
  }
  std::vector<double> held(d.rows.size(), 0);
  for (size_t f = 0; f < rep.folds.size(); ++f) {
    std::vector<size_t> train, test;
    for (size_t i = 0; i < d.rows.size(); ++i) (fold_of[i] == static_cast<int>(f) ? test : train).push_back(i);
    if (test.empty()) continue;
    Timer t(apply(base, fit_rows(base, d, train, options)));
    for (size_t i : test) held[i] = t.seconds(*d.rows[i], d.ops[i]);
  }
  Timer before(base), after(rep.fitted);
  for (size_t i = 0; i < d.rows.size(); ++i)
    rep.scored.push_back({d.rows[i], d.measured_s[i], before.seconds(*d.rows[i], d.ops[i]),
                          after.seconds(*d.rows[i], d.ops[i]), held[i]});
  return rep;
}

double error_of(const ScoredRow& r, Which which) {
  const double p = which == Which::kBefore ? r.before_s : which == Which::kFitted ? r.fitted_s : r.held_out_s;
  return p / r.measured_s - 1;
}

ErrorStats stats(const std::vector<double>& errors) {
  ErrorStats s;
  s.rows = static_cast<int>(errors.size());
  for (double e : errors) {
    s.mean_abs += std::abs(e);
    s.max_abs = std::max(s.max_abs, std::abs(e));
    s.bias += e;
  }
  if (s.rows > 0) {
    s.mean_abs /= s.rows;
    s.bias /= s.rows;
  }
  return s;
}

}  // namespace lacuna::kernelfit
