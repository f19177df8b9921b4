// The DeviceInfo of a calibration profile: the CPU (model from /proc/cpuinfo,
// hardware threads, physical memory, nominal clock when the kernel exposes it)
// or a GPU (CUDA device properties, driver and runtime versions; only in
// builds with CUDA).
#pragma once

#include <string>

#include "sim/proto/calibration.pb.h"

namespace lacuna::calibrate {

calib::DeviceInfo cpu_device_info();

// Throws lacuna::Error in builds without CUDA or when the device is absent.
calib::DeviceInfo gpu_device_info(int device);

// "13.0" from CUDA's 13000.
std::string cuda_version_string(int version);

}  // namespace lacuna::calibrate
