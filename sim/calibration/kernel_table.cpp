#include "sim/calibration/kernel_table.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "sim/calibration/fit.h"
#include "sim/core/error.h"

namespace lacuna::calibration {

const char* lookup_kind_name(LookupKind kind) {
  switch (kind) {
    case LookupKind::kExact: return "exact";
    case LookupKind::kInterpolated: return "interpolated";
    case LookupKind::kExtrapolated: return "extrapolated";
  }
  return "?";
}

std::vector<int64_t> shape_family(const std::vector<int64_t>& shape) {
  // The rank is part of the family ([m, n, k] and [m, n, k, batch] differ).
  std::vector<int64_t> family{static_cast<int64_t>(shape.size())};
  if (shape.size() > 1) family.insert(family.end(), shape.begin() + 1, shape.end());
  return family;
}

namespace {

ir::Compute as_op(const calib::OpTable& t, const calib::Measurement& m) {
  ir::Compute op;
  op.set_op_class(t.op_class());
  op.set_variant(t.variant());
  *op.mutable_shape() = m.shape();
  op.set_flops(m.flops());
  op.set_bytes(m.bytes());
  return op;
}

// The roofline of a perfect shape: the table refitted with each
// measurement's FLOPs divided by its shape factor. The stored fit when no
// measurement has a shape term (it is that already); nullopt when the scaled
// table has no roofline (the op is then extrapolated as without a shape term).
std::optional<calib::RooflineFit> shaped_fit(const calib::OpTable& t, const ShapeFactor& shape) {
  calib::OpTable scaled = t;
  bool any = false;
  for (calib::Measurement& m : *scaled.mutable_points()) {
    const double f = shape(as_op(t, m));
    if (f == 1.0 || !(f > 0)) continue;
    m.set_flops(m.flops() / f);
    any = true;
  }
  if (!any) return t.fit();
  try {
    return fit_roofline(scaled);
  } catch (const Error&) {
    return std::nullopt;
  }
}

}  // namespace

KernelTable::KernelTable(const calib::CalibrationProfile& profile, std::string profile_path, std::string scenario,
                         ShapeFactor shape)
    : path_(std::move(profile_path)),
      scenario_(scenario.empty() ? profile.scenario() : std::move(scenario)),
      shape_(std::move(shape)) {
  for (const calib::OpTable& t : profile.ops()) {
    Table& table = tables_[{static_cast<int>(t.op_class()), static_cast<int>(t.variant())}];
    table.fit = t.fit();
    // Only GEMM and attention have shape terms (cost::KernelEfficiency).
    if (shape_ && (t.op_class() == ir::GEMM || t.op_class() == ir::ATTENTION)) {
      if (const auto fit = shaped_fit(t, shape_)) {
        table.fit = *fit;
        table.shaped = true;
      }
    }
    for (const calib::Measurement& m : t.points()) {
      const std::vector<int64_t> shape(m.shape().begin(), m.shape().end());
      table.exact.emplace(shape, m.time_ns());
      table.families[shape_family(shape)].emplace_back(shape.front(), m.time_ns());
    }
    for (auto& [family, points] : table.families) std::sort(points.begin(), points.end());
  }
}

bool KernelTable::has_table(ir::OpClass op_class, ir::KernelVariant variant) const {
  return tables_.contains({static_cast<int>(op_class), static_cast<int>(variant)});
}

Lookup KernelTable::lookup(const ir::Compute& op) const {
  const auto it = tables_.find({static_cast<int>(op.op_class()), static_cast<int>(op.variant())});
  if (it == tables_.end()) {
    const std::string scenario = scenario_.empty() ? std::string("SCENARIO") : scenario_;
    throw Error(SourceLocation{path_, 0, 0, {}},
                fmt::format("the calibration profile has no kernel table for {} {}, which the program runs",
                            ir::OpClass_Name(op.op_class()), ir::KernelVariant_Name(op.variant())),
                fmt::format("re-run `lacuna calibrate` with ‹scenario {}›, the scenario you simulate, so that the "
                            "profile measures its kernels",
                            scenario));
  }
  const Table& t = it->second;
  const std::vector<int64_t> shape(op.shape().begin(), op.shape().end());
  if (const auto hit = t.exact.find(shape); hit != t.exact.end()) return {TimeNs(hit->second), LookupKind::kExact};

  if (!shape.empty() && shape.front() > 0) {
    if (const auto fam = t.families.find(shape_family(shape)); fam != t.families.end()) {
      const auto& pts = fam->second;
      const int64_t s = shape.front();
      // First point at or above s; exact hits were handled, so it is strictly above.
      const auto above = std::lower_bound(pts.begin(), pts.end(), std::make_pair(s, int64_t{0}));
      if (above != pts.end() && above != pts.begin()) {
        const auto below = std::prev(above);
        const double x0 = std::log(static_cast<double>(below->first));
        const double x1 = std::log(static_cast<double>(above->first));
        const double y0 = std::log(static_cast<double>(below->second));
        const double y1 = std::log(static_cast<double>(above->second));
        const double w = (std::log(static_cast<double>(s)) - x0) / (x1 - x0);
        const double ns = std::exp(y0 + w * (y1 - y0));
        // Clamped to the neighbours so that rounding cannot break monotonicity.
        const int64_t lo = std::min(below->second, above->second), hi = std::max(below->second, above->second);
        return {TimeNs(std::clamp<int64_t>(std::llround(ns), lo, hi)), LookupKind::kInterpolated};
      }
    }
  }
  if (!(op.flops() >= 0) || !(op.bytes() >= 0) || !std::isfinite(op.flops()) || !std::isfinite(op.bytes())) {
    throw Error(fmt::format("compute op with invalid work: flops {}, bytes {}", op.flops(), op.bytes()));
  }
  const double factor = t.shaped ? shape_(op) : 1.0;
  const double ns = roofline_time_ns(t.fit, op.flops() / (factor > 0 ? factor : 1.0), op.bytes());
  // No kernel runs for days: a fit that says so (flops_per_s 1e-6,
  // overhead_ns 1e30) is a broken profile, and llround would overflow.
  constexpr double kMaxKernelNs = 1e15;  // 11.6 days
  if (!std::isfinite(ns) || ns < 0 || ns > kMaxKernelNs)
    throw Error(SourceLocation{path_, 0, 0, "fit"},
                fmt::format("the roofline fit of {} {} (flops_per_s {}, bytes_per_s {}, overhead_ns {}) gives {} ns "
                            "for a kernel of {} FLOP and {} bytes; no kernel runs longer than {:g} ns",
                            ir::OpClass_Name(op.op_class()), ir::KernelVariant_Name(op.variant()),
                            t.fit.flops_per_s(), t.fit.bytes_per_s(), t.fit.overhead_ns(), ns, op.flops(), op.bytes(),
                            kMaxKernelNs),
                "re-run `lacuna calibrate`, or correct the fit's fields in the profile");
  return {TimeNs(std::llround(ns)), LookupKind::kExtrapolated};
}

}  // namespace lacuna::calibration
