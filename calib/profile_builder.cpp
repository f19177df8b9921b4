#include "calib/profile_builder.h"

#include <algorithm>
#include <map>

#include "sim/calibration/fit.h"
#include "sim/core/error.h"

#ifndef LACUNA_VERSION
#define LACUNA_VERSION "unknown"
#endif

namespace lacuna::calibrate {

calib::CalibrationProfile build_profile(const ProfileHeader& header, const std::vector<MeasuredPoint>& measured,
                                        const std::vector<calib::CollectiveFit>& collectives) {
  calib::CalibrationProfile p;
  p.set_format_version(1);
  p.set_lacuna_version(LACUNA_VERSION);
  *p.mutable_device() = header.device;
  p.set_precision(header.precision);
  p.set_scenario(header.scenario);
  p.set_method(header.method);

  std::map<std::pair<int, int>, std::vector<const MeasuredPoint*>> tables;
  for (const MeasuredPoint& m : measured) {
    if (!m.result.ok()) throw InternalError("internal: a failed point reached the profile: " + describe(m.point.key));
    tables[{static_cast<int>(m.point.key.op_class), static_cast<int>(m.point.key.variant)}].push_back(&m);
  }
  for (auto& [cv, points] : tables) {
    std::sort(points.begin(), points.end(),
              [](const MeasuredPoint* a, const MeasuredPoint* b) { return a->point.key.shape < b->point.key.shape; });
    calib::OpTable* t = p.add_ops();
    t->set_op_class(static_cast<ir::OpClass>(cv.first));
    t->set_variant(static_cast<ir::KernelVariant>(cv.second));
    for (const MeasuredPoint* m : points) {
      calib::Measurement* x = t->add_points();
      for (int64_t d : m->point.key.shape) x->add_shape(d);
      x->set_time_ns(m->result.median_ns);
      x->set_min_ns(m->result.min_ns);
      x->set_max_ns(m->result.max_ns);
      x->set_repetitions(m->result.repetitions);
      x->set_flops(m->point.flops);
      x->set_bytes(m->point.bytes);
      x->set_from_scenario(m->point.from_scenario);
    }
    *t->mutable_fit() = calibration::fit_roofline(*t);
  }
  for (const calib::CollectiveFit& f : collectives) *p.add_collectives() = f;
  return p;
}

}  // namespace lacuna::calibrate
