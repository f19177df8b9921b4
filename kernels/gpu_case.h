// The GPU form of a KernelCase: one Compute op of the program IR run by the
// CUDA kernels of gpu_kernels.h (and cuBLAS for GEMM) at the op's class,
// variant and shape, on seeded random non-zero inputs. What `lacuna
// calibrate` times on a GPU.
//
// Per class and variant (shapes as program.proto; sim/model/layer.cpp forms them):
//   GEMM [m, n, k(, batch)]     FORWARD C = A·B (X·W); BACKWARD_INPUT C = A·Bᵀ
//                               (dY·Wᵀ, W stored [n, k]); BACKWARD_WEIGHT C = Aᵀ·B
//                               (Xᵀ·dY, X stored [k, m]); batch > 1: strided batched.
//   ATTENTION [b, h, sq, skv, d, causal, kv_heads]
//                               FORWARD (O, LSE); BACKWARD_INPUT (dQ, dK, dV; O and
//                               LSE come from a forward run at setup). d <= 256.
//   LAYERNORM, RMSNORM [t, h]   FORWARD / BACKWARD_INPUT (dx and dgamma/dbeta).
//   GELU [n]                    FORWARD / BACKWARD_INPUT, tanh form.
//   SWIGLU [t, f]               FORWARD / BACKWARD_INPUT on x[t, 2f].
//   RESIDUAL_ADD [n]            FORWARD / BACKWARD_INPUT: out = a + b.
//   CROSS_ENTROPY [t, v]        FORWARD (loss, lse) / BACKWARD_INPUT (dlogits).
//   SOFTMAX [rows, cols]        FORWARD / BACKWARD_INPUT, row softmax.
//   ELEMENTWISE [n]             FORWARD / BACKWARD_INPUT: y = 0.9·x (a dropout-like pass).
//   EMBEDDING [t, h, v]         FORWARD gather; BACKWARD_WEIGHT scatter-add into fp32.
//   OPTIMIZER [p]               FORWARD: one AdamW step on fp32 master weights.
// Anything else is a lacuna::Error naming class, variant and shape.
//
// Rotating input sets: enough complete copies of the buffers that all sets
// together exceed 2× the L2 cache (cudaDevAttrL2CacheSize), at most 8 sets
// and at most 25% of the free device memory; one set that does not fit in
// that budget is an error. run_once_ns() launches once on the next set
// between two CUDA events and returns the elapsed GPU time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kernels/gpu_kernels.h"
#include "kernels/kernel_case.h"
#include "sim/proto/program.pb.h"

namespace lacuna::kernels {

using gpu::gpu_available;           // never throws
using gpu::gpu_unavailable_reason;  // "" when a GPU and cuBLAS are usable

struct GpuCaseOptions {
  uint64_t seed = 1;
  int max_sets = 8;
  double max_free_fraction = 0.25;  // of cudaMemGetInfo's free bytes, all sets together
};

// Builds the case and allocates and fills its sets on ctx's device. Throws
// lacuna::Error for an unsupported class / variant / shape, for a set that
// does not fit, and ("built without CUDA") in builds without CUDA.
std::unique_ptr<KernelCase> make_gpu_case(const ir::Compute& op, gpu::Context& ctx,
                                          const GpuCaseOptions& options = {});

// The device bytes of one input set of op's case, as make_gpu_case and
// make_gpu_enqueue_case allocate it (every buffer of the recipe, workspaces
// included). Pure and CUDA-free, so the executor can bound a rank's device
// memory before it allocates anything. Throws as make_gpu_case for an
// unsupported op.
int64_t gpu_case_set_bytes(const ir::Compute& op);

// How many rotating sets of `per_set_bytes`: the fewest whose total exceeds
// 2 × l2_bytes, capped at max_sets and at budget_bytes in all. Throws
// lacuna::Error when even one set exceeds budget_bytes. Pure; for tests.
int gpu_case_set_count(int64_t per_set_bytes, int64_t l2_bytes, int64_t budget_bytes, int max_sets = 8);

// The same case for the executor (runtime/cuda_backend.h): enqueue()
// launches the kernel(s) once on the next input set on the context's stream
// and returns at once (no events, no synchronisation), so the executor can
// place it between its own events and cross-stream waits. Launch errors
// still throw lacuna::Error; faults inside the kernels surface at the
// executor's next synchronisation. The executor passes max_sets = 1: it
// replays a schedule, it does not time a kernel in isolation.
class GpuEnqueueCase {
 public:
  virtual ~GpuEnqueueCase() = default;
  virtual void enqueue() = 0;
  virtual std::string describe() const = 0;
  virtual int64_t resident_bytes() const = 0;
};

// As make_gpu_case (same errors, same setup: the sets are filled and the
// context synchronised before it returns).
std::unique_ptr<GpuEnqueueCase> make_gpu_enqueue_case(const ir::Compute& op, gpu::Context& ctx,
                                                      const GpuCaseOptions& options = {});

}  // namespace lacuna::kernels
