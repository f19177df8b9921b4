// Kernels only; see cuda_spin.h. One thread each: they hold a deadline, they
// do not compete with the compute kernels beside them.
#include <cuda_runtime.h>

#include "runtime/cuda_spin.h"

namespace lacuna::runtime::cuda {
namespace {

__device__ __forceinline__ unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ void spin_until(unsigned long long deadline, const volatile int* abort) {
  unsigned int n = 0;
  while (globaltimer() < deadline) {
    // The abort flag lives in host memory: read it rarely.
    if ((++n & 1023u) == 0 && abort != nullptr && *abort != 0) return;
  }
}

__global__ void stamp_kernel(unsigned long long* slot) { *slot = globaltimer(); }

__global__ void spin_kernel(const unsigned long long* t0, long long offset_ns, long long duration_ns,
                            const volatile int* abort) {
  const unsigned long long now = globaltimer();
  long long begin = static_cast<long long>(now);
  if (t0 != nullptr) {
    const long long from_t0 = static_cast<long long>(*t0) + offset_ns;
    if (from_t0 > begin) begin = from_t0;
  }
  spin_until(static_cast<unsigned long long>(begin + (duration_ns > 0 ? duration_ns : 0)), abort);
}

__global__ void stretch_kernel(const unsigned long long* stamp, double extra, const volatile int* abort) {
  const unsigned long long now = globaltimer();
  const unsigned long long ran = now > *stamp ? now - *stamp : 0;
  spin_until(now + static_cast<unsigned long long>(static_cast<double>(ran) * extra), abort);
}

int last_error() { return static_cast<int>(cudaGetLastError()); }

}  // namespace

static_assert(sizeof(unsigned long long) == sizeof(std::uint64_t));

int launch_stamp(void* stream, std::uint64_t* slot) {
  stamp_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(reinterpret_cast<unsigned long long*>(slot));
  return last_error();
}

int launch_spin(void* stream, const std::uint64_t* t0, std::int64_t offset_ns, std::int64_t duration_ns,
                const volatile int* abort) {
  spin_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(reinterpret_cast<const unsigned long long*>(t0),
                                                               offset_ns, duration_ns, abort);
  return last_error();
}

int launch_stretch(void* stream, const std::uint64_t* stamp, double extra, const volatile int* abort) {
  stretch_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(
      reinterpret_cast<const unsigned long long*>(stamp), extra > 0 ? extra : 0.0, abort);
  return last_error();
}

const char* error_string(int code) { return cudaGetErrorString(static_cast<cudaError_t>(code)); }

}  // namespace lacuna::runtime::cuda
