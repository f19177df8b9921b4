#include "sim/calibration/fit.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include <fmt/format.h>

#include "sim/core/error.h"

namespace lacuna::calibration {
namespace {

// Least squares for ≤ 3 unknowns: minimise Σ (rows[i]·x − 1)² over the
// columns in `use`. Columns are scaled to unit norm first (FLOPs and bytes
// differ from 1/time by ~15 orders of magnitude). nullopt when singular.
struct Row {
  std::array<double, 3> v;  // (1, f, y) / t for (overhead, s/flop, s/byte)
};

std::optional<std::array<double, 3>> least_squares(const std::vector<Row>& rows, std::array<bool, 3> use) {
  std::array<int, 3> cols{};
  int m = 0;
  for (int j = 0; j < 3; ++j)
    if (use[j]) cols[m++] = j;
  if (m == 0) return std::nullopt;
  std::array<double, 3> scale{};
  for (int a = 0; a < m; ++a) {
    double s = 0;
    for (const Row& r : rows) s += r.v[cols[a]] * r.v[cols[a]];
    if (!(s > 0)) return std::nullopt;  // a column of zeros: the parameter is not identifiable here
    scale[a] = 1.0 / std::sqrt(s);
  }
  // Normal equations (AᵀA) z = Aᵀ1 on the scaled columns, then Gaussian elimination with pivoting.
  double n[3][4] = {};
  for (const Row& r : rows) {
    for (int a = 0; a < m; ++a) {
      const double xa = r.v[cols[a]] * scale[a];
      for (int b = 0; b < m; ++b) n[a][b] += xa * r.v[cols[b]] * scale[b];
      n[a][3] += xa;
    }
  }
  for (int p = 0; p < m; ++p) {
    int best = p;
    for (int q = p + 1; q < m; ++q)
      if (std::abs(n[q][p]) > std::abs(n[best][p])) best = q;
    if (std::abs(n[best][p]) < 1e-12) return std::nullopt;
    for (int c = 0; c < 4; ++c) std::swap(n[p][c], n[best][c]);
    for (int q = 0; q < m; ++q) {
      if (q == p) continue;
      const double k = n[q][p] / n[p][p];
      for (int c = p; c < 4; ++c) n[q][c] -= k * n[p][c];
    }
  }
  std::array<double, 3> x{};
  for (int a = 0; a < m; ++a) x[cols[a]] = n[a][3] / n[a][a] * scale[a];
  return x;
}

struct Point {
  double f, y, t;  // FLOPs, bytes, time in ns
};

// (overhead ns, ns per FLOP, ns per byte)
using Params = std::array<double, 3>;

double rms_relative(const std::vector<Point>& pts, const Params& p) {
  double sum = 0;
  for (const Point& q : pts) {
    const double pred = std::max(p[1] * q.f, p[2] * q.y) + p[0];
    const double r = (pred - q.t) / q.t;
    sum += r * r;
  }
  return std::sqrt(sum / static_cast<double>(pts.size()));
}

struct Best {
  Params p{};
  double rms = std::numeric_limits<double>::infinity();
  bool found = false;
};

// Tries every subset of free parameters for one assignment of points to
// bounds (memory[i] true: bytes-bound) and keeps the best non-negative one.
void try_assignment(const std::vector<Point>& pts, const std::vector<bool>& memory, bool flops_allowed, Best& best) {
  std::vector<Row> rows;
  rows.reserve(pts.size());
  for (size_t i = 0; i < pts.size(); ++i) {
    const Point& q = pts[i];
    rows.push_back(Row{{1.0 / q.t, memory[i] ? 0.0 : q.f / q.t, memory[i] ? q.y / q.t : 0.0}});
  }
  for (int mask = 1; mask < 8; ++mask) {
    const std::array<bool, 3> use{(mask & 1) != 0, (mask & 2) != 0, (mask & 4) != 0};
    if (!use[1] && !use[2]) continue;  // a roofline needs a rate
    if (use[1] && !flops_allowed) continue;
    const auto x = least_squares(rows, use);
    if (!x) continue;
    if ((*x)[0] < 0 || (*x)[1] < 0 || (*x)[2] < 0) continue;
    if (!((*x)[1] > 0 || (*x)[2] > 0)) continue;
    const double rms = rms_relative(pts, *x);
    if (rms < best.rms) best = Best{*x, rms, true};
  }
}

}  // namespace

double roofline_time_ns(const calib::RooflineFit& fit, double flops, double bytes) {
  const double compute = fit.flops_per_s() > 0 ? flops / fit.flops_per_s() * 1e9 : 0.0;
  const double memory = fit.bytes_per_s() > 0 ? bytes / fit.bytes_per_s() * 1e9 : 0.0;
  return std::max(compute, memory) + fit.overhead_ns();
}

calib::RooflineFit fit_roofline(const calib::OpTable& table) {
  const std::string what = fmt::format("{} {}", ir::OpClass_Name(table.op_class()), ir::KernelVariant_Name(table.variant()));
  if (table.points().empty()) throw Error("fit_roofline: the table of " + what + " has no measurements");
  std::vector<Point> pts;
  bool any_flops = false;
  for (const auto& m : table.points()) {
    if (m.time_ns() <= 0 || !(m.flops() >= 0) || !(m.bytes() >= 0)) {
      throw Error(fmt::format("fit_roofline: {}: a measurement has time {} ns, {} FLOPs, {} bytes", what, m.time_ns(),
                              m.flops(), m.bytes()));
    }
    pts.push_back(Point{m.flops(), m.bytes(), static_cast<double>(m.time_ns())});
    any_flops = any_flops || m.flops() > 0;
  }
  // Ascending arithmetic intensity: a roofline's memory-bound points come first.
  std::vector<size_t> order(pts.size());
  std::iota(order.begin(), order.end(), 0);
  const auto intensity = [&](size_t i) {
    if (pts[i].y > 0) return pts[i].f / pts[i].y;
    return pts[i].f > 0 ? std::numeric_limits<double>::infinity() : 0.0;
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return intensity(a) < intensity(b); });

  Best best;
  std::vector<bool> memory(pts.size());
  const size_t first_split = any_flops ? 0 : pts.size();  // no FLOPs: everything is memory-bound
  for (size_t k = first_split; k <= pts.size(); ++k) {
    for (size_t r = 0; r < order.size(); ++r) memory[order[r]] = r < k;
    try_assignment(pts, memory, any_flops, best);
  }
  // Refine: reassign each point to the bound the fit says dominates, refit.
  for (int round = 0; round < 10 && best.found; ++round) {
    for (size_t i = 0; i < pts.size(); ++i) memory[i] = best.p[2] * pts[i].y >= best.p[1] * pts[i].f;
    const double before = best.rms;
    try_assignment(pts, memory, any_flops, best);
    if (!(best.rms < before)) break;
  }
  if (!best.found) {
    throw Error("fit_roofline: " + what + ": no non-negative roofline fits the measurements");
  }
  calib::RooflineFit fit;
  fit.set_flops_per_s(best.p[1] > 0 ? 1e9 / best.p[1] : 0.0);
  fit.set_bytes_per_s(best.p[2] > 0 ? 1e9 / best.p[2] : 0.0);
  fit.set_overhead_ns(best.p[0]);
  fit.set_rms_relative_error(best.rms);
  return fit;
}

double bus_factor(ir::CollectiveKind kind, bool p2p, int32_t group_size) {
  if (p2p) return 1.0;
  const double n = group_size;
  switch (kind) {
    case ir::ALL_REDUCE: return 2.0 * (n - 1) / n;
    case ir::ALL_GATHER:
    case ir::REDUCE_SCATTER:
    case ir::ALL_TO_ALL: return (n - 1) / n;
    case ir::BROADCAST:
    case ir::REDUCE: return 1.0;
    default: throw Error("bus_factor: collective kind " + std::to_string(static_cast<int>(kind)) + " is not set");
  }
}

calib::CollectiveFit fit_collective(ir::CollectiveKind kind, bool p2p, int32_t group_size, calib::LinkKind link,
                                    const std::vector<calib::CollectivePoint>& points) {
  const std::string what = p2p ? std::string("send/receive") : ir::CollectiveKind_Name(kind);
  if (group_size < 2) throw Error(fmt::format("fit_collective: {}: group size {} (need ≥ 2)", what, group_size));
  if (points.empty()) throw Error("fit_collective: " + what + ": no measurements");
  const double bf = bus_factor(kind, p2p, group_size);
  // Minimise Σ ((α + c·x − t) / t)² with x = bytes · bus factor, c = 1 / busbw (ns per byte).
  double s11 = 0, s1x = 0, sxx = 0, s1 = 0, sx = 0;
  for (const auto& p : points) {
    if (p.bytes() <= 0 || p.time_ns() <= 0) {
      throw Error(fmt::format("fit_collective: {}: a point has {} bytes in {} ns (both must be > 0)", what, p.bytes(),
                              p.time_ns()));
    }
    const double t = static_cast<double>(p.time_ns());
    const double u = 1.0 / t, v = static_cast<double>(p.bytes()) * bf / t;
    s11 += u * u;
    s1x += u * v;
    sxx += v * v;
    s1 += u;
    sx += v;
  }
  double alpha = 0, c = 0;
  const double det = s11 * sxx - s1x * s1x;
  if (points.size() >= 2 && det > 1e-12 * s11 * sxx) {
    alpha = (s1 * sxx - sx * s1x) / det;
    c = (s11 * sx - s1x * s1) / det;
  }
  if (!(alpha >= 0) || !(c > 0)) {  // latency must not be negative: fit the bandwidth alone
    alpha = 0;
    c = sx / sxx;
  }
  calib::CollectiveFit fit;
  fit.set_kind(p2p ? ir::COLLECTIVE_UNSPECIFIED : kind);
  fit.set_p2p(p2p);
  fit.set_group_size(group_size);
  fit.set_link(link);
  fit.set_latency_ns(alpha);
  fit.set_bus_bandwidth_bytes_per_s(1e9 / c);
  for (const auto& p : points) {
    calib::CollectivePoint* q = fit.add_points();
    *q = p;
    const double algbw = static_cast<double>(p.bytes()) / static_cast<double>(p.time_ns());  // bytes/ns = GB/s
    q->set_algbw_gb_per_s(algbw);
    q->set_busbw_gb_per_s(algbw * bf);
  }
  return fit;
}

}  // namespace lacuna::calibration
