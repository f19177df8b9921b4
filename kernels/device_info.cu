#include <cuda_runtime.h>

#include "kernels/device_info.h"

namespace lacuna::kernels {

DeviceReport query_devices() {
  DeviceReport report;
  report.built_with_cuda = true;
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    report.why_none = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(err);
    return report;
  }
  if (count == 0) {
    report.why_none = "CUDA runtime reports 0 devices";
    return report;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    GpuInfo g;
    g.index = i;
    g.name = prop.name;
    g.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
    g.sm_count = prop.multiProcessorCount;
    g.compute_capability_major = prop.major;
    g.compute_capability_minor = prop.minor;
    report.gpus.push_back(g);
  }
  if (report.gpus.empty()) report.why_none = "no device answered cudaGetDeviceProperties";
  return report;
}

}  // namespace lacuna::kernels
