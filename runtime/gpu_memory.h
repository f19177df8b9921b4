// What one rank of the CUDA backend will allocate on its GPU, computed from
// the plan on the host before any device allocation, so that a rank too large
// for its GPU is refused with the figure and its parts instead of failing
// partway through setup in cudaMalloc (issue 16). docs/executor.md#memory.
//
// CUDA-free: the buffer sizing here is the one runtime/cuda_rank.cpp
// allocates, so the estimate and the allocation cannot drift apart.
#pragma once

#include <cstddef>
#include <string>

#include "runtime/plan.h"
#include "sim/core/units.h"

namespace lacuna::runtime {

// bf16 elements of op p's NCCL buffer: `bytes` (program.proto's S) rounded up
// to whole elements, and to a multiple of the group size where the
// collective splits the buffer (all-gather, reduce-scatter, all-to-all).
std::size_t nccl_bf16_elements(const PlannedOp& p);

// A stream's two NCCL buffers in bf16 elements (each at least 1): `a` holds
// every collective and send/recv; `b` is the second buffer of all-to-all and
// reduce. Fixed-duration and emulated ops move one element of `a` or none.
struct NcclBufferElements {
  std::size_t a = 1;
  std::size_t b = 1;
};
NcclBufferElements nccl_buffer_elements(const StreamPlan& sp);

// Device memory one stream's context costs beyond its buffers: a CUDA stream,
// two events and a cuBLAS handle with the workspace cuBLAS allocates on its
// first GEMM. Measured: 67,108,864 bytes (64 MiB) on an NVIDIA H100 80GB HBM3
// with CUDA 13.0 and its cuBLAS, driver 580.159.04 (the GPU test
// CudaMemory.ContextCostsAtMostTheReserve, which prints the figure; 2026-11-26).
// cuBLAS's own guidance is a 32 MiB workspace on Hopper (cuBLAS API
// reference, cublasSetWorkspace). The reserve is the measurement plus half,
// for other cuBLAS versions and the allocator's 2 MiB granularity.
inline constexpr Bytes kCudaStreamReserve = Bytes(std::int64_t{96} << 20);

struct GpuMemoryEstimate {
  Bytes kernel;    // the rank's kernel cases, one input set each (kernels::gpu_case_set_bytes)
  Bytes transfer;  // its streams' NCCL buffers a and b (bf16)
  Bytes contexts;  // kCudaStreamReserve per stream
  // Saturates at INT64_MAX, as each part does.
  Bytes total() const;
};

// The rank's streams in `plan`. A kernel the GPU cannot run counts 0 here:
// the stream's setup reports it, naming the op.
GpuMemoryEstimate estimate_gpu_memory(const Plan& plan, int rank);

// Throws lacuna::Error when the estimate exceeds `free_bytes` (cudaMemGetInfo
// on the rank's device once its CUDA context and NCCL communicators exist),
// naming the rank, the device and each part, with what would reduce it.
void check_gpu_memory(const GpuMemoryEstimate& estimate, Bytes free_bytes, int rank, const std::string& device);

}  // namespace lacuna::runtime
