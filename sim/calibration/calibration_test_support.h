// Small profiles built in code for the calibration tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/calibration/fit.h"
#include "sim/proto/calibration.pb.h"

namespace lacuna::calibration::testing {

inline calib::Measurement point(std::vector<int64_t> shape, int64_t ns, double flops = 0, double bytes = 0) {
  calib::Measurement m;
  for (int64_t d : shape) m.add_shape(d);
  m.set_time_ns(ns);
  m.set_min_ns(ns);
  m.set_max_ns(ns);
  m.set_repetitions(5);
  m.set_flops(flops);
  m.set_bytes(bytes);
  return m;
}

// Adds a table of `points` with its fitted roofline (validate_profile needs a fit).
inline calib::OpTable& add_table(calib::CalibrationProfile& p, ir::OpClass c, ir::KernelVariant v,
                                 const std::vector<calib::Measurement>& points) {
  calib::OpTable* t = p.add_ops();
  t->set_op_class(c);
  t->set_variant(v);
  for (const auto& m : points) *t->add_points() = m;
  *t->mutable_fit() = fit_roofline(*t);
  return *t;
}

inline calib::CalibrationProfile gpu_profile(const std::string& device = "NVIDIA H100 80GB HBM3") {
  calib::CalibrationProfile p;
  p.set_format_version(1);
  p.set_lacuna_version("0.1.0");
  p.mutable_device()->set_kind(calib::DeviceInfo::GPU);
  p.mutable_device()->set_name(device);
  p.set_precision(scenario::BF16);
  p.set_scenario("scenarios/llm/gpt-1.3b-8gpu.pbtxt");
  p.set_method("synthetic (tests)");
  return p;
}

inline ir::Compute compute_op(ir::OpClass c, ir::KernelVariant v, std::vector<int64_t> shape, double flops = 0,
                              double bytes = 0) {
  ir::Compute op;
  op.set_op_class(c);
  op.set_variant(v);
  for (int64_t d : shape) op.add_shape(d);
  op.set_flops(flops);
  op.set_bytes(bytes);
  return op;
}

}  // namespace lacuna::calibration::testing
