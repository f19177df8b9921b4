#include "sim/kernelfit/table_profile.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "sim/calibration/fit.h"
#include "sim/core/error.h"
#include "sim/kernelfit/table_kernel.h"
#include "sim/core/version.h"

namespace lacuna::kernelfit {

calib::CalibrationProfile profile_from_table(const std::vector<MeasuredKernel>& rows, const scenario::GpuSpec& gpu,
                                             scenario::Precision precision, const std::vector<std::string>& comments,
                                             int* left_out) {
  calib::CalibrationProfile p;
  p.set_format_version(1);
  p.set_lacuna_version(lacuna_version());
  calib::DeviceInfo* d = p.mutable_device();
  d->set_kind(calib::DeviceInfo::GPU);
  d->set_name(gpu.name());
  d->set_sm_count(static_cast<int32_t>(gpu.num_sms()));
  p.set_precision(precision);
  std::string method = "a measured kernel table converted by `lacuna calibrate --from-table`";
  for (const std::string& c : comments) method += "; " + c;
  p.set_method(method);

  // (class, variant) → shape → point, both ordered: the same table gives the same file.
  std::map<std::pair<int, int>, std::map<std::vector<int64_t>, calib::Measurement>> tables;
  int skipped = 0;
  for (const MeasuredKernel& r : rows) {
    if (!r.time_us || r.dtype != precision) {
      ++skipped;
      continue;
    }
    const ir::Compute op = kernel_of(r);
    calib::Measurement m;
    for (int64_t v : r.shape) m.add_shape(v);
    const int64_t ns = std::max<int64_t>(1, std::llround(*r.time_us * 1e3));
    m.set_time_ns(ns);
    m.set_min_ns(ns);
    m.set_max_ns(ns);
    m.set_repetitions(1);  // the table holds one median per row
    m.set_flops(op.flops());
    m.set_bytes(op.bytes());
    m.set_from_scenario(r.group != "grid");
    auto& points = tables[{static_cast<int>(op.op_class()), static_cast<int>(op.variant())}];
    if (!points.try_emplace(r.shape, std::move(m)).second) ++skipped;
  }
  if (tables.empty())
    throw Error(SourceLocation{rows.empty() ? "" : rows.front().file, 0, 0, "dtype"},
                "no measured row of the profile's precision in the table",
                "measure the kernels in bf16 (the device campaign does), or give ‹precision›");
  for (auto& [key, points] : tables) {
    calib::OpTable* t = p.add_ops();
    t->set_op_class(static_cast<ir::OpClass>(key.first));
    t->set_variant(static_cast<ir::KernelVariant>(key.second));
    for (auto& [shape, m] : points) *t->add_points() = std::move(m);
    *t->mutable_fit() = calibration::fit_roofline(*t);
  }
  if (left_out) *left_out = skipped;
  return p;
}

}  // namespace lacuna::kernelfit
