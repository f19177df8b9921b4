// CUDA kernels of a transformer layer behind a plain C++ interface: no CUDA
// type appears here, so every translation unit (and the CPU-only build)
// includes it. The kernels compute exactly the math and layouts of the CPU
// references (ref_norms.h, ref_activations.h, ref_gemm.h,
// ref_cross_entropy.h, ref_attention.h), with bf16 storage and fp32
// accumulation; statistics (mean, rstd, LSE, loss) are fp32. docs: the
// "CUDA kernels" section of docs/kernels.md.
//
// Every function launches on the context's stream and returns without
// synchronising; a CUDA or cuBLAS failure (including the launch error
// checked after every kernel) is a lacuna::Error naming the kernel, and so is
// a buffer of the wrong dtype or size. Outputs are overwritten unless stated.
// A Context and its buffers belong to the host thread that created them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/ref_attention.h"  // AttentionShape
#include "kernels/ref_cross_entropy.h"
#include "kernels/ref_gemm.h"   // GemmShape
#include "kernels/ref_norms.h"  // NormShape

namespace lacuna::kernels::gpu {

// ---------------------------------------------------------------- availability

// True when this build has CUDA, a GPU answers and cuBLAS loads. Never throws.
bool gpu_available();
// Why gpu_available() is false ("" when it is true); for skips and `lacuna devices`.
std::string gpu_unavailable_reason();

// Round-to-nearest-even float → bf16 → float, as the device conversion
// (__float2bfloat16_rn); NaN stays NaN. Host-only, for building references
// from the values a bf16 buffer really holds.
float round_to_bf16(float x);

// ---------------------------------------------------------------- context

class Context {
 public:
  // Selects `device`, creates a non-blocking stream, two timing events and a
  // cuBLAS handle bound to the stream. Throws lacuna::Error saying why when
  // there is no GPU, the index is out of range, cuBLAS cannot be loaded, or
  // the build has no CUDA.
  explicit Context(int device = 0);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int device() const;
  std::string device_name() const;
  int64_t l2_cache_bytes() const;       // cudaDevAttrL2CacheSize
  int64_t free_memory_bytes() const;    // cudaMemGetInfo, now
  int sm_count() const;
  std::string cublas_description() const;  // library path and version

  // Blocks until everything launched on the stream has finished.
  void synchronize();

  // Records an event, calls `launch` (which must only enqueue work on this
  // context's stream), records a second event, waits for it and returns the
  // elapsed GPU time in nanoseconds (>= 0).
  double time_ns(const std::function<void()>& launch);

  // For the launch code: cudaStream_t and cublasHandle_t, type-erased.
  void* stream() const;
  void* cublas_handle() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---------------------------------------------------------------- device memory

enum class DType { kBf16, kF32, kI32 };
const char* dtype_name(DType t);
int64_t dtype_bytes(DType t);

// Device memory of `elements` values of one dtype, freed on destruction.
// Transfers go through the context's stream and wait for it, so they see the
// results of every kernel launched before them. The Context must outlive it.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Context& ctx, DType dtype, int64_t elements);  // elements >= 1
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  DType dtype() const { return dtype_; }
  int64_t size() const { return elements_; }
  int64_t bytes() const { return elements_ * dtype_bytes(dtype_); }
  void* data() { return ptr_; }
  const void* data() const { return ptr_; }
  bool empty() const { return ptr_ == nullptr; }

  // From host floats (bf16 buffers: rounded to nearest even on the host; f32
  // as is); values.size() must equal size(). Not for kI32.
  void upload(std::span<const float> values);
  // Into a kI32 buffer only.
  void upload(std::span<const int32_t> values);
  // The contents as floats (bf16 widened exactly). Not for kI32.
  std::vector<float> download() const;
  std::vector<int32_t> download_i32() const;

  // Deterministic in (seed, index), on the device: magnitudes uniform in
  // [lo, hi] with a random sign (signed) or positive; 0 < lo <= hi, so no
  // value is zero (bf16 rounding keeps them non-zero). Not for kI32.
  void fill_random(uint64_t seed, float lo = 0.5f, float hi = 1.5f, bool signed_values = true);
  // kI32 only: uniform integers in [0, bound), bound >= 1 (token ids, targets).
  void fill_indices(uint64_t seed, int32_t bound);
  void zero();

 private:
  Context* ctx_ = nullptr;
  DType dtype_ = DType::kF32;
  int64_t elements_ = 0;
  void* ptr_ = nullptr;
};

// ---------------------------------------------------------------- norms
// x, gamma, beta, y, dy, dx: bf16; mean, rstd, dgamma, dbeta: f32.

void layernorm_forward(Context& ctx, const DeviceBuffer& x, const DeviceBuffer& gamma, const DeviceBuffer& beta,
                       ref::NormShape s, double eps, DeviceBuffer& y, DeviceBuffer& mean, DeviceBuffer& rstd);
void layernorm_backward(Context& ctx, const DeviceBuffer& x, const DeviceBuffer& gamma, const DeviceBuffer& dy,
                        const DeviceBuffer& mean, const DeviceBuffer& rstd, ref::NormShape s, DeviceBuffer& dx,
                        DeviceBuffer& dgamma, DeviceBuffer& dbeta);
void rmsnorm_forward(Context& ctx, const DeviceBuffer& x, const DeviceBuffer& gamma, ref::NormShape s, double eps,
                     DeviceBuffer& y, DeviceBuffer& rstd);
void rmsnorm_backward(Context& ctx, const DeviceBuffer& x, const DeviceBuffer& gamma, const DeviceBuffer& dy,
                      const DeviceBuffer& rstd, ref::NormShape s, DeviceBuffer& dx, DeviceBuffer& dgamma);

// ---------------------------------------------------------------- activations (bf16)

// GeLU, tanh form (ref::GeluKind::kTanh); element count from x.
void gelu_forward(Context& ctx, const DeviceBuffer& x, DeviceBuffer& y);
void gelu_backward(Context& ctx, const DeviceBuffer& x, const DeviceBuffer& dy, DeviceBuffer& dx);
// x[t, 2f] = [gate | up] per row, y[t, f] = silu(gate)·up; dx in x's layout.
void swiglu_forward(Context& ctx, const DeviceBuffer& x, int64_t t, int64_t f, DeviceBuffer& y);
void swiglu_backward(Context& ctx, const DeviceBuffer& x, const DeviceBuffer& dy, int64_t t, int64_t f,
                     DeviceBuffer& dx);
// out = a + b; out may be a or b.
void residual_add(Context& ctx, const DeviceBuffer& a, const DeviceBuffer& b, DeviceBuffer& out);

// ---------------------------------------------------------------- cross-entropy
// logits bf16 [t, v]; targets i32 [t] in [0, v); loss, lse, dloss f32 [t];
// dlogits bf16. The forward also writes the row log-sum-exp, which the
// backward reads instead of recomputing the max and the sum.
void cross_entropy_forward(Context& ctx, const DeviceBuffer& logits, const DeviceBuffer& targets, ref::CeShape s,
                           DeviceBuffer& loss, DeviceBuffer& lse);
void cross_entropy_backward(Context& ctx, const DeviceBuffer& logits, const DeviceBuffer& targets,
                            const DeviceBuffer& lse, const DeviceBuffer& dloss, ref::CeShape s,
                            DeviceBuffer& dlogits);

// ---------------------------------------------------------------- attention
// Layouts as ref_attention.h: Q, O, dQ, dO bf16 [b, s_q, heads, d]; K, V, dK,
// dV bf16 [b, s_kv, kv_heads, d]; LSE f32 [b, heads, s_q]. GQA, bottom-right
// causal. head_dim <= 256.

void attention_forward(Context& ctx, const AttentionShape& s, const DeviceBuffer& q, const DeviceBuffer& k,
                       const DeviceBuffer& v, DeviceBuffer& o, DeviceBuffer& lse);
// f32 elements the backward needs as scratch (D = rowsum(dO∘O)).
int64_t attention_backward_workspace_elements(const AttentionShape& s);
void attention_backward(Context& ctx, const AttentionShape& s, const DeviceBuffer& q, const DeviceBuffer& k,
                        const DeviceBuffer& v, const DeviceBuffer& o, const DeviceBuffer& lse,
                        const DeviceBuffer& dout, DeviceBuffer& dq, DeviceBuffer& dk, DeviceBuffer& dv,
                        DeviceBuffer& workspace);

// ---------------------------------------------------------------- GEMM (cuBLAS)
// Row-major C[m, n] = op(A)·op(B) with ref::gemm's transpose flags; bf16 in
// and out, fp32 accumulation (CUBLAS_COMPUTE_32F). Batched: `batch`
// independent products with A, B, C packed back to back.
void gemm(Context& ctx, const DeviceBuffer& a, const DeviceBuffer& b, ref::GemmShape s, DeviceBuffer& c);
void gemm_batched(Context& ctx, const DeviceBuffer& a, const DeviceBuffer& b, ref::GemmShape s, int64_t batch,
                  DeviceBuffer& c);

// ---------------------------------------------------------------- misc memory-bound kernels

// Row softmax of scale·x over [rows, cols] (bf16 in and out), and its
// backward dx = y∘(dy − rowsum(dy∘y)) from the saved y.
void softmax_forward(Context& ctx, const DeviceBuffer& x, int64_t rows, int64_t cols, float scale,
                     DeviceBuffer& y);
void softmax_backward(Context& ctx, const DeviceBuffer& y, const DeviceBuffer& dy, int64_t rows, int64_t cols,
                      float scale, DeviceBuffer& dx);
// y = alpha·x (bf16), the stand-in for dropout / bias / copy kernels.
void scale_copy(Context& ctx, const DeviceBuffer& x, float alpha, DeviceBuffer& y);

struct AdamParams {
  float lr = 1e-4f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;  // decoupled (AdamW)
  int step = 1;               // >= 1, for the bias corrections
};
// AdamW on fp32 master params with fp32 grad, m, v (all updated in place
// except grad), writing the bf16 copy of the weights as Megatron's
// distributed optimizer does: m = β1·m + (1−β1)·g; v = β2·v + (1−β2)·g²;
// p −= lr·(m/(1−β1^step) / (sqrt(v/(1−β2^step)) + eps) + wd·p).
void adam_step(Context& ctx, DeviceBuffer& params, const DeviceBuffer& grads, DeviceBuffer& m, DeviceBuffer& v,
               const AdamParams& p, DeviceBuffer& weights_bf16);

// Embedding gather out[t, h] = table[ids[t], :] (bf16; ids i32 in [0, vocab)),
// and its backward: dtable (f32 [vocab, h]) += dy[t, :] at row ids[t]
// (accumulates, as into Megatron's main_grad: zero it first for a fresh sum).
void embedding_forward(Context& ctx, const DeviceBuffer& ids, const DeviceBuffer& table, int64_t tokens,
                       int64_t hidden, int64_t vocab, DeviceBuffer& out);
void embedding_backward(Context& ctx, const DeviceBuffer& ids, const DeviceBuffer& dy, int64_t tokens,
                        int64_t hidden, int64_t vocab, DeviceBuffer& dtable);

}  // namespace lacuna::kernels::gpu
