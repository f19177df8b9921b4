// The CPU form of a KernelCase: one Compute op of the program IR run by the
// float32 CPU reference kernels (kernels/ref_*.h) at the op's class, variant
// and shape, on seeded random non-zero inputs. What `lacuna calibrate --cpu`
// times and what the CPU executor runs for each Compute op.
//
// Per class and variant (shapes as program.proto; sim/model/layer.cpp forms them):
//   GEMM [m, n, k(, batch)]      FORWARD C = X·W; BACKWARD_INPUT dX = dY·Wᵀ (W stored
//                                [n, k]); BACKWARD_WEIGHT dW = Xᵀ·dY (X stored [k, m]).
//                                A cache-blocked float32 GEMM (blocked_gemm below,
//                                same results as ref::gemm up to float rounding).
//   ATTENTION [b, h, sq, skv, d, causal, kv_heads]
//                                FORWARD / BACKWARD_INPUT: the FA2-style tiled
//                                reference (ref_attention.h), 64 × 64 blocks.
//   LAYERNORM, RMSNORM [t, h]    FORWARD / BACKWARD_INPUT (ref_norms.h).
//   GELU [n]                     FORWARD / BACKWARD_INPUT, tanh form (ref_activations.h).
//   SWIGLU [t, f]                FORWARD / BACKWARD_INPUT on x[t, 2f].
//   RESIDUAL_ADD [n]             FORWARD / BACKWARD_INPUT: out = a + b.
//   CROSS_ENTROPY [t, v]         FORWARD / BACKWARD_INPUT (mean loss).
//   SOFTMAX [rows, cols]         FORWARD / BACKWARD_INPUT (softmax_forward/backward).
//   ELEMENTWISE [n]              FORWARD / BACKWARD_INPUT: dropout with a stored mask.
//   EMBEDDING [t, h, v]          FORWARD row gather; BACKWARD_WEIGHT scatter-add.
//   OPTIMIZER [p]                FORWARD: one Adam step (adam_step).
// Anything else (another variant, a shape of the wrong rank or with a
// non-positive entry) is a lacuna::Error naming class, variant and shape.
//
// Rotating input sets: enough copies of every buffer that one pass over all
// sets exceeds 2× the last-level cache (at most 4 sets, and at most
// `max_resident_bytes` in all), so that consecutive runs do not find their
// inputs in cache. run_once_ns() uses the next set and times the kernel with
// std::chrono::steady_clock on the calling thread (single-threaded).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "kernels/kernel_case.h"
#include "kernels/ref_gemm.h"
#include "sim/proto/program.pb.h"

namespace lacuna::kernels {

struct CpuCaseOptions {
  std::uint64_t seed = 1;
  int max_sets = 4;                                      // rotating input sets, at most
  std::int64_t max_resident_bytes = std::int64_t{4} << 30;  // all sets together
  std::int64_t cache_bytes = 0;                          // 0: last_level_cache_bytes()
};

// A KernelCase on the CPU, with read access to its buffers for tests.
class CpuCase : public KernelCase {
 public:
  // The buffer `name` of the input set the last run_once_ns() used (set 0
  // before any run): e.g. "x", "w", "y" for a GEMM. Throws lacuna::Error for
  // an unknown name. For tests and debugging, not for timing.
  virtual std::span<const float> buffer(std::string_view name) const = 0;
  // Names of the buffers of one set, in allocation order.
  virtual std::string buffer_names() const = 0;
  virtual int sets() const = 0;
};

// Builds the case for `op` (op.op_class(), op.variant(), op.shape()). Throws
// lacuna::Error for unsupported combinations.
std::unique_ptr<CpuCase> make_cpu_case(const ir::Compute& op, const CpuCaseOptions& options);
std::unique_ptr<KernelCase> make_cpu_case(const ir::Compute& op);

// The bytes make_cpu_case(op, options) would keep resident (every set's
// buffers and the shared data), without allocating them; the same errors.
std::int64_t cpu_case_resident_bytes(const ir::Compute& op, const CpuCaseOptions& options);

// Whether make_cpu_case handles this class and variant (shapes aside).
bool cpu_case_supported(ir::OpClass op_class, ir::KernelVariant variant);

// The last-level cache in bytes: sysconf(_SC_LEVEL3_CACHE_SIZE), else the
// largest cache level in /sys/devices/system/cpu/cpu0/cache, else 32 MiB.
std::int64_t last_level_cache_bytes();

// ---- the kernels the case runs that are not in ref_*.h (float32, row-major)

// Cache-blocked C = op(A)·op(B) with float accumulation (ref::gemm's layout
// and transpose flags; C overwritten). Wrong sizes throw lacuna::Error.
void blocked_gemm(std::span<const float> a, std::span<const float> b, ref::GemmShape s, std::span<float> c);

// y[r, :] = softmax(scale · x[r, :]) (max-subtracted), rows × cols.
void softmax_forward(std::span<const float> x, std::int64_t rows, std::int64_t cols, float scale,
                     std::span<float> y);
// dx = scale · y ∘ (dy − Σ_j dy·y) per row, from the forward's output y.
void softmax_backward(std::span<const float> y, std::span<const float> dy, std::int64_t rows, std::int64_t cols,
                      float scale, std::span<float> dx);

// Dropout with a stored keep mask (1 keep, 0 drop): y = x · mask / (1 − p).
// The backward is the same product on dy.
void dropout_apply(std::span<const float> x, std::span<const std::uint8_t> mask, float p, std::span<float> y);

// out[i, :] = table[ids[i], :] (table [vocab, hidden]).
void embedding_forward(std::span<const float> table, std::span<const std::int32_t> ids, std::int64_t hidden,
                       std::span<float> out);
// dtable[ids[i], :] += dy[i, :] (accumulates, as Megatron's main grads).
void embedding_backward(std::span<const float> dy, std::span<const std::int32_t> ids, std::int64_t hidden,
                        std::span<float> dtable);

// One Adam step (bias-corrected, step `step` ≥ 1) on params, with moments m, v.
struct AdamConfig {
  float lr = 1e-4f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  int step = 1;
};
void adam_step(std::span<float> params, std::span<const float> grads, std::span<float> m, std::span<float> v,
               const AdamConfig& config);

}  // namespace lacuna::kernels
