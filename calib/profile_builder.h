// Assembles a calibration profile (sim/proto/calibration.proto) from measured
// points: one OpTable per (op class, variant), tables in enum order and points
// sorted by shape (the same measurements give the same file), each table
// fitted with calibration::fit_roofline.
#pragma once

#include <string>
#include <vector>

#include "calib/bench_driver.h"
#include "calib/grid.h"
#include "sim/proto/calibration.pb.h"
#include "sim/proto/scenario.pb.h"

namespace lacuna::calibrate {

struct MeasuredPoint {
  GridPoint point;
  BenchResult result;  // must be ok()
};

struct ProfileHeader {
  calib::DeviceInfo device;
  scenario::Precision precision = scenario::PRECISION_UNSPECIFIED;
  std::string scenario;  // scenario file(s) whose shapes were measured; empty: the built-in family set
  std::string method;
};

calib::CalibrationProfile build_profile(const ProfileHeader& header, const std::vector<MeasuredPoint>& measured,
                                        const std::vector<calib::CollectiveFit>& collectives);

}  // namespace lacuna::calibrate
