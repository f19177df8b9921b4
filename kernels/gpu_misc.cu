// The small kernels: deterministic random fills, row softmax (SOFTMAX),
// scale/copy (ELEMENTWISE), the AdamW step (OPTIMIZER), embedding gather and
// scatter-add (EMBEDDING), and the error-string hook of gpu_launch.h.
#include "kernels/gpu_device_util.h"
#include "kernels/gpu_launch.h"

namespace lacuna::kernels::gpu {
namespace {

using dev::bf16;
using dev::to_bf;
using dev::first_index;
using dev::grid_stride;
using dev::to_f;

constexpr int kThreads = 256;


// splitmix64: a counter-based generator, so element i's value depends only on
// (seed, i), whatever the grid.
__device__ __forceinline__ uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

template <typename T>
__global__ void fill_random_kernel(T* __restrict__ data, int64_t n, uint64_t seed, float lo, float hi,
                                   bool signed_values) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const uint64_t r = mix(seed ^ mix(static_cast<uint64_t>(i)));
    const float u = static_cast<float>(r >> 40) * (1.0f / 16777216.0f);  // 24 bits → [0, 1)
    float v = lo + (hi - lo) * u;
    if (signed_values && (r & 1u)) v = -v;
    if constexpr (sizeof(T) == 2)
      data[i] = to_bf(v);
    else
      data[i] = v;
  }
}

__global__ void fill_indices_kernel(int32_t* __restrict__ data, int64_t n, uint64_t seed, int32_t bound) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const uint64_t r = mix(seed ^ mix(static_cast<uint64_t>(i)));
    data[i] = static_cast<int32_t>((r >> 11) % static_cast<uint64_t>(bound));
  }
}

// One block per row: y = exp(scale·x − max) / Σ.
__global__ void __launch_bounds__(kThreads)
    softmax_forward_kernel(const bf16* __restrict__ x, int64_t cols, float scale, bf16* __restrict__ y) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const bf16* xr = x + row * cols;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, scale * to_f(xr[c]));
  m = dev::block_max(m, scratch);
  float s = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += expf(scale * to_f(xr[c]) - m);
  const float inv = 1.0f / dev::block_sum(s, scratch);
  bf16* yr = y + row * cols;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = to_bf(expf(scale * to_f(xr[c]) - m) * inv);
}

// dx = scale·y∘(dy − Σ dy∘y), the gradient of softmax(scale·x).
__global__ void __launch_bounds__(kThreads)
    softmax_backward_kernel(const bf16* __restrict__ y, const bf16* __restrict__ dy, int64_t cols, float scale,
                            bf16* __restrict__ dx) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const bf16* yr = y + row * cols;
  const bf16* dyr = dy + row * cols;
  float s = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += to_f(dyr[c]) * to_f(yr[c]);
  const float dot = dev::block_sum(s, scratch);
  bf16* dxr = dx + row * cols;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    dxr[c] = to_bf(scale * to_f(yr[c]) * (to_f(dyr[c]) - dot));
}

__global__ void scale_copy_kernel(const bf16* __restrict__ x, int64_t n, float alpha, bf16* __restrict__ y) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) y[i] = to_bf(alpha * to_f(x[i]));
}

__global__ void adam_kernel(float* __restrict__ p, const float* __restrict__ g, float* __restrict__ m,
                            float* __restrict__ v, int64_t n, float lr, float beta1, float beta2, float eps,
                            float wd, float bias1, float bias2, bf16* __restrict__ w) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const float gi = g[i];
    const float mi = beta1 * m[i] + (1.0f - beta1) * gi;
    const float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
    const float update = (mi / bias1) / (sqrtf(vi / bias2) + eps);
    const float pi = p[i] - lr * (update + wd * p[i]);
    m[i] = mi;
    v[i] = vi;
    p[i] = pi;
    w[i] = to_bf(pi);
  }
}

// Vocab-parallel semantics: an id outside this rank's [0, vocab) gives a zero row.
__global__ void embedding_forward_kernel(const int32_t* __restrict__ ids, const bf16* __restrict__ table,
                                         int64_t tokens, int64_t hidden, int64_t vocab, bf16* __restrict__ out) {
  const int64_t n = tokens * hidden;
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const int64_t r = i / hidden, c = i - r * hidden;
    const int64_t id = ids[r];
    out[i] = (id >= 0 && id < vocab) ? table[id * hidden + c] : to_bf(0.0f);
  }
}

__global__ void embedding_backward_kernel(const int32_t* __restrict__ ids, const bf16* __restrict__ dy,
                                          int64_t tokens, int64_t hidden, int64_t vocab,
                                          float* __restrict__ dtable) {
  const int64_t n = tokens * hidden;
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const int64_t r = i / hidden, c = i - r * hidden;
    const int64_t id = ids[r];
    // Atomic: tokens repeating an id add into the same row.
    if (id >= 0 && id < vocab) atomicAdd(dtable + id * hidden + c, to_f(dy[i]));
  }
}

}  // namespace

namespace launch {

const char* error_string(int code) { return cudaGetErrorString(static_cast<cudaError_t>(code)); }

int fill_random(void* stream, void* data, int dtype, int64_t n, uint64_t seed, float lo, float hi,
                bool signed_values) {
  cudaStream_t s = dev::as_stream(stream);
  if (dtype == 0)
    fill_random_kernel<bf16><<<dev::grid_for(n, kThreads), kThreads, 0, s>>>(static_cast<bf16*>(data), n, seed, lo,
                                                                            hi, signed_values);
  else
    fill_random_kernel<float><<<dev::grid_for(n, kThreads), kThreads, 0, s>>>(static_cast<float*>(data), n, seed,
                                                                             lo, hi, signed_values);
  return dev::launch_status();
}

int fill_indices(void* stream, int32_t* data, int64_t n, uint64_t seed, int32_t bound) {
  fill_indices_kernel<<<dev::grid_for(n, kThreads), kThreads, 0, dev::as_stream(stream)>>>(data, n, seed, bound);
  return dev::launch_status();
}

int softmax_forward(void* stream, const void* x, int64_t rows, int64_t cols, float scale, void* y) {
  softmax_forward_kernel<<<static_cast<unsigned>(rows), kThreads, 0, dev::as_stream(stream)>>>(
      static_cast<const bf16*>(x), cols, scale, static_cast<bf16*>(y));
  return dev::launch_status();
}

int softmax_backward(void* stream, const void* y, const void* dy, int64_t rows, int64_t cols, float scale,
                     void* dx) {
  softmax_backward_kernel<<<static_cast<unsigned>(rows), kThreads, 0, dev::as_stream(stream)>>>(
      static_cast<const bf16*>(y), static_cast<const bf16*>(dy), cols, scale, static_cast<bf16*>(dx));
  return dev::launch_status();
}

int scale_copy(void* stream, const void* x, int64_t n, float alpha, void* y) {
  scale_copy_kernel<<<dev::grid_for(n, kThreads), kThreads, 0, dev::as_stream(stream)>>>(
      static_cast<const bf16*>(x), n, alpha, static_cast<bf16*>(y));
  return dev::launch_status();
}

int adam_step(void* stream, float* params, const float* grads, float* m, float* v, int64_t n, float lr,
              float beta1, float beta2, float eps, float weight_decay, float bias1, float bias2,
              void* weights_bf16) {
  adam_kernel<<<dev::grid_for(n, kThreads), kThreads, 0, dev::as_stream(stream)>>>(
      params, grads, m, v, n, lr, beta1, beta2, eps, weight_decay, bias1, bias2, static_cast<bf16*>(weights_bf16));
  return dev::launch_status();
}

int embedding_forward(void* stream, const int32_t* ids, const void* table, int64_t tokens, int64_t hidden,
                      int64_t vocab, void* out) {
  embedding_forward_kernel<<<dev::grid_for(tokens * hidden, kThreads), kThreads, 0, dev::as_stream(stream)>>>(
      ids, static_cast<const bf16*>(table), tokens, hidden, vocab, static_cast<bf16*>(out));
  return dev::launch_status();
}

int embedding_backward(void* stream, const int32_t* ids, const void* dy, int64_t tokens, int64_t hidden,
                       int64_t vocab, float* dtable) {
  embedding_backward_kernel<<<dev::grid_for(tokens * hidden, kThreads), kThreads, 0, dev::as_stream(stream)>>>(
      ids, static_cast<const bf16*>(dy), tokens, hidden, vocab, dtable);
  return dev::launch_status();
}

}  // namespace launch
}  // namespace lacuna::kernels::gpu
