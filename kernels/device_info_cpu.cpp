// The query for builds without CUDA.
#include "kernels/device_info.h"

#ifndef LACUNA_HAVE_CUDA
namespace lacuna::kernels {

DeviceReport query_devices() {
  DeviceReport report;
  report.built_with_cuda = false;
  report.why_none = "this lacuna was built without CUDA (no nvcc at configure time)";
  return report;
}

}  // namespace lacuna::kernels
#endif
