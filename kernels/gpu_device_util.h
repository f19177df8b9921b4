// Device-side helpers shared by the kernels/*.cu files. CUDA only: include
// from .cu files, never from a .cpp (those compile without CUDA too).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace lacuna::kernels::gpu::dev {

using bf16 = __nv_bfloat16;

constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ float to_f(bf16 v) { return __bfloat162float(v); }
__device__ __forceinline__ bf16 to_bf(float v) { return __float2bfloat16_rn(v); }

// Grid-stride loops: this thread's first element and the stride.
__device__ __forceinline__ int64_t first_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}

// Sum over the block, returned to every thread. Every thread of the block
// must call it (it synchronises); blockDim.x is a multiple of 32. `scratch`
// is a __shared__ float[32] that may be reused by the next call: the leading
// barrier keeps a fast warp from overwriting partials a slow warp still reads.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  return warp_sum(lane < warps ? scratch[lane] : 0.0f);
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  return warp_max(lane < warps ? scratch[lane] : -INFINITY);
}

// Blocks for a grid-stride loop over n elements: enough to fill the GPU,
// few enough that grid.x never overflows.
inline unsigned grid_for(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  constexpr int64_t kMaxBlocks = 1 << 16;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

inline cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

// The error of the launch just made (configuration errors show at once;
// faults inside the kernel show at the next synchronising call).
inline int launch_status() { return static_cast<int>(cudaGetLastError()); }

}  // namespace lacuna::kernels::gpu::dev
