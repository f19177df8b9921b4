// Softmax cross-entropy over rows of bf16 logits [t, v] (ref_cross_entropy.h),
// one block per row. Forward: max, then Σ exp(l − max) (two reads of the row,
// the second mostly from L2), loss = lse − l[target]. Backward: one pass,
// dlogits = dloss·(exp(l − lse) − [j == target]) from the forward's lse.
#include "kernels/gpu_device_util.h"
#include "kernels/gpu_launch.h"

namespace lacuna::kernels::gpu {
namespace {

using dev::bf16;
using dev::to_bf;
using dev::to_f;

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    ce_forward_kernel(const bf16* __restrict__ logits, const int32_t* __restrict__ targets, int64_t v,
                      float* __restrict__ loss, float* __restrict__ lse) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const bf16* lr = logits + row * v;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < v; c += blockDim.x) m = fmaxf(m, to_f(lr[c]));
  m = dev::block_max(m, scratch);
  float s = 0.0f;
  for (int64_t c = threadIdx.x; c < v; c += blockDim.x) s += expf(to_f(lr[c]) - m);
  s = dev::block_sum(s, scratch);
  if (threadIdx.x == 0) {
    const float l = m + logf(s);
    const int32_t target = targets[row];
    lse[row] = l;
    // A target outside the vocabulary cannot be reported from here: make it visible as NaN.
    loss[row] = (target >= 0 && target < v) ? l - to_f(lr[target]) : __int_as_float(0x7fc00000);
  }
}

__global__ void __launch_bounds__(kThreads)
    ce_backward_kernel(const bf16* __restrict__ logits, const int32_t* __restrict__ targets,
                       const float* __restrict__ lse, const float* __restrict__ dloss, int64_t v,
                       bf16* __restrict__ dlogits) {
  const int64_t row = blockIdx.x;
  const bf16* lr = logits + row * v;
  bf16* dr = dlogits + row * v;
  const float l = lse[row], d = dloss[row];
  const int64_t target = targets[row];
  for (int64_t c = threadIdx.x; c < v; c += blockDim.x) {
    const float p = expf(to_f(lr[c]) - l);
    dr[c] = to_bf(d * (p - (c == target ? 1.0f : 0.0f)));
  }
}

}  // namespace

namespace launch {

int cross_entropy_forward(void* stream, const void* logits, const int32_t* targets, int64_t t, int64_t v,
                          float* loss, float* lse) {
  ce_forward_kernel<<<static_cast<unsigned>(t), kThreads, 0, dev::as_stream(stream)>>>(
      static_cast<const bf16*>(logits), targets, v, loss, lse);
  return dev::launch_status();
}

int cross_entropy_backward(void* stream, const void* logits, const int32_t* targets, const float* lse,
                           const float* dloss, int64_t t, int64_t v, void* dlogits) {
  ce_backward_kernel<<<static_cast<unsigned>(t), kThreads, 0, dev::as_stream(stream)>>>(
      static_cast<const bf16*>(logits), targets, lse, dloss, v, static_cast<bf16*>(dlogits));
  return dev::launch_status();
}

}  // namespace launch
}  // namespace lacuna::kernels::gpu
