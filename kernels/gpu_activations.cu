// GeLU (tanh form), SwiGLU and the residual add: elementwise, bf16 in and
// out, fp32 math (ref_activations.h). Grid-stride loops, one element per
// thread per iteration (no vector loads: any n, any alignment).
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
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;


__global__ void gelu_forward_kernel(const bf16* __restrict__ x, int64_t n, bf16* __restrict__ y) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const float v = to_f(x[i]);
    y[i] = to_bf(0.5f * v * (1.0f + tanhf(kSqrt2OverPi * (v + kGeluCubic * v * v * v))));
  }
}

__global__ void gelu_backward_kernel(const bf16* __restrict__ x, const bf16* __restrict__ dy, int64_t n,
                                     bf16* __restrict__ dx) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const float v = to_f(x[i]);
    const float th = tanhf(kSqrt2OverPi * (v + kGeluCubic * v * v * v));
    const float grad =
        0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * v * v);
    dx[i] = to_bf(to_f(dy[i]) * grad);
  }
}

__device__ __forceinline__ float sigmoid(float z) { return 1.0f / (1.0f + expf(-z)); }

// Element (r, j) of y[t, f] reads gate x[r, j] and up x[r, f + j].
__global__ void swiglu_forward_kernel(const bf16* __restrict__ x, int64_t t, int64_t f, bf16* __restrict__ y) {
  const int64_t n = t * f;
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const int64_t r = i / f, j = i - r * f;
    const float gate = to_f(x[r * 2 * f + j]), up = to_f(x[r * 2 * f + f + j]);
    y[i] = to_bf(gate * sigmoid(gate) * up);
  }
}

__global__ void swiglu_backward_kernel(const bf16* __restrict__ x, const bf16* __restrict__ dy, int64_t t,
                                       int64_t f, bf16* __restrict__ dx) {
  const int64_t n = t * f;
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const int64_t r = i / f, j = i - r * f;
    const float gate = to_f(x[r * 2 * f + j]), up = to_f(x[r * 2 * f + f + j]), g = to_f(dy[i]);
    const float s = sigmoid(gate);
    // silu'(z) = σ(z)·(1 + z·(1 − σ(z))).
    dx[r * 2 * f + j] = to_bf(g * up * s * (1.0f + gate * (1.0f - s)));
    dx[r * 2 * f + f + j] = to_bf(g * gate * s);
  }
}

// out may alias a or b: each element is read before it is written, by the same thread.
__global__ void residual_add_kernel(const bf16* a, const bf16* b, int64_t n, bf16* out) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) out[i] = to_bf(to_f(a[i]) + to_f(b[i]));
}

}  // namespace

namespace launch {

int gelu_forward(void* stream, const void* x, int64_t n, void* y) {
  gelu_forward_kernel<<<dev::grid_for(n, kThreads), kThreads, 0, dev::as_stream(stream)>>>(
      static_cast<const bf16*>(x), n, static_cast<bf16*>(y));
  return dev::launch_status();
}

int gelu_backward(void* stream, const void* x, const void* dy, int64_t n, void* dx) {
  gelu_backward_kernel<<<dev::grid_for(n, kThreads), kThreads, 0, dev::as_stream(stream)>>>(
      static_cast<const bf16*>(x), static_cast<const bf16*>(dy), n, static_cast<bf16*>(dx));
  return dev::launch_status();
}

int swiglu_forward(void* stream, const void* x, int64_t t, int64_t f, void* y) {
  swiglu_forward_kernel<<<dev::grid_for(t * f, kThreads), kThreads, 0, dev::as_stream(stream)>>>(
      static_cast<const bf16*>(x), t, f, static_cast<bf16*>(y));
  return dev::launch_status();
}

int swiglu_backward(void* stream, const void* x, const void* dy, int64_t t, int64_t f, void* dx) {
  swiglu_backward_kernel<<<dev::grid_for(t * f, kThreads), kThreads, 0, dev::as_stream(stream)>>>(
      static_cast<const bf16*>(x), static_cast<const bf16*>(dy), t, f, static_cast<bf16*>(dx));
  return dev::launch_status();
}

int residual_add(void* stream, const void* a, const void* b, int64_t n, void* out) {
  residual_add_kernel<<<dev::grid_for(n, kThreads), kThreads, 0, dev::as_stream(stream)>>>(
      static_cast<const bf16*>(a), static_cast<const bf16*>(b), n, static_cast<bf16*>(out));
  return dev::launch_status();
}

}  // namespace launch
}  // namespace lacuna::kernels::gpu
