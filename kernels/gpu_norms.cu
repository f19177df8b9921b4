// LayerNorm and RMSNorm over rows of [t, h], bf16 storage, fp32 math
// (ref_norms.h). Forward and the dx part of the backward: one block per row,
// warp-shuffle + shared-memory reductions. dgamma/dbeta: a second kernel over
// (column block, row chunk) that adds its partial column sums atomically.
#include "kernels/gpu_device_util.h"
#include "kernels/gpu_launch.h"

namespace lacuna::kernels::gpu {
namespace {

using dev::bf16;
using dev::to_bf;
using dev::to_f;

constexpr int kRowThreads = 256;
constexpr int kColThreads = 256;

// kCentered: LayerNorm (subtract the mean, add beta); else RMSNorm.
template <bool kCentered>
__global__ void __launch_bounds__(kRowThreads)
    norm_forward_kernel(const bf16* __restrict__ x, const bf16* __restrict__ gamma, const bf16* __restrict__ beta,
                        int64_t h, float eps, bf16* __restrict__ y, float* __restrict__ mean,
                        float* __restrict__ rstd) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const bf16* xr = x + row * h;
  bf16* yr = y + row * h;
  float mu = 0.0f;
  if constexpr (kCentered) {
    float s = 0.0f;
    for (int64_t c = threadIdx.x; c < h; c += blockDim.x) s += to_f(xr[c]);
    mu = dev::block_sum(s, scratch) / static_cast<float>(h);
  }
  // Second pass over (x − mean) rather than E[x²] − mean²: no cancellation.
  float sq = 0.0f;
  for (int64_t c = threadIdx.x; c < h; c += blockDim.x) {
    const float d = to_f(xr[c]) - mu;
    sq += d * d;
  }
  const float rs = rsqrtf(dev::block_sum(sq, scratch) / static_cast<float>(h) + eps);
  for (int64_t c = threadIdx.x; c < h; c += blockDim.x) {
    float v = (to_f(xr[c]) - mu) * rs * to_f(gamma[c]);
    if constexpr (kCentered) v += to_f(beta[c]);
    yr[c] = to_bf(v);
  }
  if (threadIdx.x == 0) {
    if constexpr (kCentered) mean[row] = mu;
    rstd[row] = rs;
  }
}

// dx = rstd·(g − mean(g) − xhat·mean(g·xhat)), g = dy·gamma (RMSNorm: no mean(g) term).
template <bool kCentered>
__global__ void __launch_bounds__(kRowThreads)
    norm_backward_dx_kernel(const bf16* __restrict__ x, const bf16* __restrict__ gamma,
                            const bf16* __restrict__ dy, const float* __restrict__ mean,
                            const float* __restrict__ rstd, int64_t h, bf16* __restrict__ dx) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const bf16* xr = x + row * h;
  const bf16* dyr = dy + row * h;
  const float mu = kCentered ? mean[row] : 0.0f;
  const float rs = rstd[row];
  float sum_g = 0.0f, sum_gx = 0.0f;
  for (int64_t c = threadIdx.x; c < h; c += blockDim.x) {
    const float g = to_f(dyr[c]) * to_f(gamma[c]);
    sum_g += g;
    sum_gx += g * (to_f(xr[c]) - mu) * rs;
  }
  const float inv_h = 1.0f / static_cast<float>(h);
  const float mean_g = kCentered ? dev::block_sum(sum_g, scratch) * inv_h : 0.0f;
  const float mean_gx = dev::block_sum(sum_gx, scratch) * inv_h;
  bf16* dxr = dx + row * h;
  for (int64_t c = threadIdx.x; c < h; c += blockDim.x) {
    const float g = to_f(dyr[c]) * to_f(gamma[c]);
    const float xhat = (to_f(xr[c]) - mu) * rs;
    dxr[c] = to_bf(rs * (g - mean_g - xhat * mean_gx));
  }
}

// dgamma[c] += Σ_rows dy·xhat, dbeta[c] += Σ_rows dy over this block's row
// chunk; the outputs are zeroed before the launch. Threads of a warp take
// adjacent columns, so every row read is coalesced.
template <bool kCentered>
__global__ void __launch_bounds__(kColThreads)
    norm_param_grad_kernel(const bf16* __restrict__ x, const bf16* __restrict__ dy, const float* __restrict__ mean,
                           const float* __restrict__ rstd, int64_t t, int64_t h, int64_t rows_per_chunk,
                           float* __restrict__ dgamma, float* __restrict__ dbeta) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= h) return;  // no barrier below, so an early exit is safe
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
  const int64_t r1 = r0 + rows_per_chunk < t ? r0 + rows_per_chunk : t;
  float dg = 0.0f, db = 0.0f;
  for (int64_t r = r0; r < r1; ++r) {
    const float d = to_f(dy[r * h + c]);
    const float mu = kCentered ? mean[r] : 0.0f;
    dg += d * (to_f(x[r * h + c]) - mu) * rstd[r];
    db += d;
  }
  atomicAdd(dgamma + c, dg);
  if constexpr (kCentered) atomicAdd(dbeta + c, db);
}

template <bool kCentered>
int forward(void* stream, const void* x, const void* gamma, const void* beta, int64_t t, int64_t h, float eps,
            void* y, float* mean, float* rstd) {
  norm_forward_kernel<kCentered><<<static_cast<unsigned>(t), kRowThreads, 0, dev::as_stream(stream)>>>(
      static_cast<const bf16*>(x), static_cast<const bf16*>(gamma), static_cast<const bf16*>(beta), h, eps,
      static_cast<bf16*>(y), mean, rstd);
  return dev::launch_status();
}

template <bool kCentered>
int backward(void* stream, const void* x, const void* gamma, const void* dy, const float* mean, const float* rstd,
             int64_t t, int64_t h, void* dx, float* dgamma, float* dbeta) {
  cudaStream_t s = dev::as_stream(stream);
  const auto* xb = static_cast<const bf16*>(x);
  const auto* dyb = static_cast<const bf16*>(dy);
  norm_backward_dx_kernel<kCentered><<<static_cast<unsigned>(t), kRowThreads, 0, s>>>(
      xb, static_cast<const bf16*>(gamma), dyb, mean, rstd, h, static_cast<bf16*>(dx));
  if (int e = dev::launch_status()) return e;
  if (cudaError_t e = cudaMemsetAsync(dgamma, 0, static_cast<size_t>(h) * sizeof(float), s)) return e;
  if constexpr (kCentered) {
    if (cudaError_t e = cudaMemsetAsync(dbeta, 0, static_cast<size_t>(h) * sizeof(float), s)) return e;
  }
  // Chunks of >= 32 rows keep the atomics at h·t/32; grid.y stays <= 65535.
  int64_t rows_per_chunk = 32;
  if ((t + rows_per_chunk - 1) / rows_per_chunk > 65535) rows_per_chunk = (t + 65534) / 65535;
  const dim3 grid(static_cast<unsigned>((h + kColThreads - 1) / kColThreads),
                  static_cast<unsigned>((t + rows_per_chunk - 1) / rows_per_chunk));
  norm_param_grad_kernel<kCentered><<<grid, kColThreads, 0, s>>>(xb, dyb, mean, rstd, t, h, rows_per_chunk, dgamma,
                                                                 dbeta);
  return dev::launch_status();
}

}  // namespace

namespace launch {

int layernorm_forward(void* stream, const void* x, const void* gamma, const void* beta, int64_t t, int64_t h,
                      float eps, void* y, float* mean, float* rstd) {
  return forward<true>(stream, x, gamma, beta, t, h, eps, y, mean, rstd);
}

int layernorm_backward(void* stream, const void* x, const void* gamma, const void* dy, const float* mean,
                       const float* rstd, int64_t t, int64_t h, void* dx, float* dgamma, float* dbeta) {
  return backward<true>(stream, x, gamma, dy, mean, rstd, t, h, dx, dgamma, dbeta);
}

int rmsnorm_forward(void* stream, const void* x, const void* gamma, int64_t t, int64_t h, float eps, void* y,
                    float* rstd) {
  return forward<false>(stream, x, gamma, nullptr, t, h, eps, y, nullptr, rstd);
}

int rmsnorm_backward(void* stream, const void* x, const void* gamma, const void* dy, const float* rstd, int64_t t,
                     int64_t h, void* dx, float* dgamma) {
  return backward<false>(stream, x, gamma, dy, nullptr, rstd, t, h, dx, dgamma, nullptr);
}

}  // namespace launch
}  // namespace lacuna::kernels::gpu
