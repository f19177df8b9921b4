// The launch wrappers of gpu_launch.h for builds without CUDA: each fails
// with code 1 and "built without CUDA". Unreachable in practice (no
// gpu::Context can be made without CUDA), but gpu_ops.cpp links in both builds.
#include "kernels/gpu_launch.h"

#ifndef LACUNA_HAVE_CUDA
namespace lacuna::kernels::gpu::launch {
namespace {
constexpr int kFail = 1;
constexpr const char* kNoCuda = "this lacuna was built without CUDA";
}  // namespace

const char* error_string(int) { return kNoCuda; }
int fill_random(void*, void*, int, int64_t, uint64_t, float, float, bool) { return kFail; }
int fill_indices(void*, int32_t*, int64_t, uint64_t, int32_t) { return kFail; }
int layernorm_forward(void*, const void*, const void*, const void*, int64_t, int64_t, float, void*, float*, float*) { return kFail; }
int layernorm_backward(void*, const void*, const void*, const void*, const float*, const float*, int64_t, int64_t, void*, float*, float*) { return kFail; }
int rmsnorm_forward(void*, const void*, const void*, int64_t, int64_t, float, void*, float*) { return kFail; }
int rmsnorm_backward(void*, const void*, const void*, const void*, const float*, int64_t, int64_t, void*, float*) { return kFail; }
int gelu_forward(void*, const void*, int64_t, void*) { return kFail; }
int gelu_backward(void*, const void*, const void*, int64_t, void*) { return kFail; }
int swiglu_forward(void*, const void*, int64_t, int64_t, void*) { return kFail; }
int swiglu_backward(void*, const void*, const void*, int64_t, int64_t, void*) { return kFail; }
int residual_add(void*, const void*, const void*, int64_t, void*) { return kFail; }
int cross_entropy_forward(void*, const void*, const int32_t*, int64_t, int64_t, float*, float*) { return kFail; }
int cross_entropy_backward(void*, const void*, const int32_t*, const float*, const float*, int64_t, int64_t, void*) { return kFail; }
int attention_forward(void*, const AttentionDims&, const void*, const void*, const void*, void*, float*) { return kFail; }
int attention_backward(void*, const AttentionDims&, const void*, const void*, const void*, const void*, const float*, const void*, void*, void*, void*, float*) { return kFail; }
int softmax_forward(void*, const void*, int64_t, int64_t, float, void*) { return kFail; }
int softmax_backward(void*, const void*, const void*, int64_t, int64_t, float, void*) { return kFail; }
int scale_copy(void*, const void*, int64_t, float, void*) { return kFail; }
int adam_step(void*, float*, const float*, float*, float*, int64_t, float, float, float, float, float, float, float, void*) { return kFail; }
int embedding_forward(void*, const int32_t*, const void*, int64_t, int64_t, int64_t, void*) { return kFail; }
int embedding_backward(void*, const int32_t*, const void*, int64_t, int64_t, int64_t, float*) { return kFail; }

}  // namespace lacuna::kernels::gpu::launch
#endif
