// A measured kernel table as a calibration profile (sim/proto/calibration.proto):
// what `lacuna calibrate --from-table` writes, so that the kernels the device
// campaign measured with a framework's own libraries time a simulation
// (`--calibration`) exactly at the shapes they were measured, with the
// profile's fitted roofline elsewhere (docs/calibration.md).
#pragma once

#include <string>
#include <vector>

#include "sim/kernelfit/measured_table.h"
#include "sim/proto/calibration.pb.h"
#include "sim/proto/scenario.pb.h"

namespace lacuna::kernelfit {

// One OpTable per (class, variant) in enum order, points sorted by shape,
// each a row with a time of the table's precision (`precision`: BF16 or FP16;
// other rows are left out and counted in `left_out`); a shape measured twice
// keeps its first row. FLOPs and bytes are the compiler's (table_kernel.h).
// The device is `gpu`'s CUDA name, so that the profile matches scenarios on
// that preset; `method` keeps the table's comments (source, device, software,
// clocks). Throws lacuna::Error when no row qualifies.
calib::CalibrationProfile profile_from_table(const std::vector<MeasuredKernel>& rows, const scenario::GpuSpec& gpu,
                                             scenario::Precision precision, const std::vector<std::string>& comments,
                                             int* left_out = nullptr);

}  // namespace lacuna::kernelfit
