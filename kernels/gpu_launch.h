// The launch wrappers of the .cu files, with plain C++ signatures (fmt and
// lacuna::Error stay out of nvcc's way): raw device pointers (bf16 as void*),
// the stream as void*, and the CUDA error code after the launch as an int
// (0 = success) for the caller to turn into a lacuna::Error. In builds without
// CUDA, gpu_launch_stub.cpp defines them to fail (they are unreachable there:
// no Context can be made). Internal to kernels/gpu_*.
#pragma once

#include <cstdint>

namespace lacuna::kernels::gpu::launch {

const char* error_string(int code);

// dtype: 0 bf16, 1 f32 (gpu::DType's order).
int fill_random(void* stream, void* data, int dtype, int64_t n, uint64_t seed, float lo, float hi,
                bool signed_values);
int fill_indices(void* stream, int32_t* data, int64_t n, uint64_t seed, int32_t bound);

int layernorm_forward(void* stream, const void* x, const void* gamma, const void* beta, int64_t t, int64_t h,
                      float eps, void* y, float* mean, float* rstd);
int layernorm_backward(void* stream, const void* x, const void* gamma, const void* dy, const float* mean,
                       const float* rstd, int64_t t, int64_t h, void* dx, float* dgamma, float* dbeta);
int rmsnorm_forward(void* stream, const void* x, const void* gamma, int64_t t, int64_t h, float eps, void* y,
                    float* rstd);
int rmsnorm_backward(void* stream, const void* x, const void* gamma, const void* dy, const float* rstd, int64_t t,
                     int64_t h, void* dx, float* dgamma);

int gelu_forward(void* stream, const void* x, int64_t n, void* y);
int gelu_backward(void* stream, const void* x, const void* dy, int64_t n, void* dx);
int swiglu_forward(void* stream, const void* x, int64_t t, int64_t f, void* y);
int swiglu_backward(void* stream, const void* x, const void* dy, int64_t t, int64_t f, void* dx);
int residual_add(void* stream, const void* a, const void* b, int64_t n, void* out);

int cross_entropy_forward(void* stream, const void* logits, const int32_t* targets, int64_t t, int64_t v,
                          float* loss, float* lse);
int cross_entropy_backward(void* stream, const void* logits, const int32_t* targets, const float* lse,
                           const float* dloss, int64_t t, int64_t v, void* dlogits);

struct AttentionDims {
  int64_t batch, heads, kv_heads, seq_q, seq_kv, head_dim;
  bool causal;
  float scale;
};
int attention_forward(void* stream, const AttentionDims& d, const void* q, const void* k, const void* v, void* o,
                      float* lse);
// workspace: batch·heads·seq_q floats (D = rowsum(dO∘O)).
int attention_backward(void* stream, const AttentionDims& d, const void* q, const void* k, const void* v,
                       const void* o, const float* lse, const void* dout, void* dq, void* dk, void* dv,
                       float* workspace);

int softmax_forward(void* stream, const void* x, int64_t rows, int64_t cols, float scale, void* y);
int softmax_backward(void* stream, const void* y, const void* dy, int64_t rows, int64_t cols, float scale,
                     void* dx);
int scale_copy(void* stream, const void* x, int64_t n, float alpha, void* y);
// bias1 = 1 − β1^step, bias2 = 1 − β2^step (computed on the host in double).
int adam_step(void* stream, float* params, const float* grads, float* m, float* v, int64_t n, float lr,
              float beta1, float beta2, float eps, float weight_decay, float bias1, float bias2, void* weights_bf16);
int embedding_forward(void* stream, const int32_t* ids, const void* table, int64_t tokens, int64_t hidden,
                      int64_t vocab, void* out);
int embedding_backward(void* stream, const int32_t* ids, const void* dy, int64_t tokens, int64_t hidden,
                       int64_t vocab, float* dtable);

}  // namespace lacuna::kernels::gpu::launch
