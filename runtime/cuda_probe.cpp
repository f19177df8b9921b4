#ifdef LACUNA_HAVE_CUDA
#include "runtime/cuda_probe.h"

#include <cuda_runtime.h>

#include <cstdio>

#include "kernels/nccl_loader.h"
#include "sim/core/error.h"

namespace lacuna::runtime {
namespace {

std::string version_text(int v) {  // CUDA's 1000·major + 10·minor
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

}  // namespace

int local_gpu_count(std::string& why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    why = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(e);
    return 0;
  }
  if (count == 0) why = "the CUDA runtime reports 0 devices";
  return count;
}

std::string describe_cuda_device(int device) {
  std::string why;
  const int count = local_gpu_count(why);
  if (count == 0) throw Error("no GPU: " + why);
  if (device < 0 || device >= count) {
    throw Error("GPU " + std::to_string(device) + " does not exist: " + std::to_string(count) + " device(s) present");
  }
  cudaDeviceProp prop{};
  if (const cudaError_t e = cudaGetDeviceProperties(&prop, device); e != cudaSuccess) {
    throw Error(std::string("cudaGetDeviceProperties: ") + cudaGetErrorString(e));
  }
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);  // 0 when unknown: shown as 0.0
  cudaRuntimeGetVersion(&runtime);
  char mem[32];
  std::snprintf(mem, sizeof mem, "%.1f GiB", static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  std::string out = std::string(prop.name) + " (device " + std::to_string(device) + " of " + std::to_string(count) +
                    "): " + std::to_string(prop.multiProcessorCount) + " SMs, " + mem + ", driver " +
                    version_text(driver) + ", runtime " + version_text(runtime) + "; ";
  try {
    const kernels::nccl::Library lib = kernels::nccl::Library::load();
    out += "NCCL " + lib.version() + " (" + lib.path() + ")";
  } catch (const Error&) {
    out += "NCCL not loadable (replay of one rank still works)";
  }
  return out;
}

}  // namespace lacuna::runtime
#endif
