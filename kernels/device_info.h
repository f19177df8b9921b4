// Which GPUs this process can use. Plain C++ interface: the CUDA side lives in
// device_info.cu and is compiled only where nvcc exists.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lacuna::kernels {

struct GpuInfo {
  int index = 0;
  std::string name;
  int64_t memory_bytes = 0;
  int sm_count = 0;
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
};

struct DeviceReport {
  bool built_with_cuda = false;
  std::vector<GpuInfo> gpus;  // empty: no usable GPU
  std::string why_none;       // set when gpus is empty
};

// Never throws and never aborts: any CUDA error or a count of 0 means "no GPU".
DeviceReport query_devices();

}  // namespace lacuna::kernels
