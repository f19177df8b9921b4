// One GPU kernel with its exact work: FLOPs executed and HBM bytes moved.
// The formulas (and why) are in docs/kernels.md; 16-bit activations and
// weights, so one element is 2 bytes unless a comment says otherwise.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/proto/program.pb.h"

namespace lacuna::model {

struct Kernel {
  ir::OpClass op_class = ir::OP_CLASS_UNSPECIFIED;
  ir::KernelRole role = ir::ROLE_UNSPECIFIED;
  ir::Phase phase = ir::FORWARD;
  std::vector<int64_t> shape;  // per OpClass, see program.proto
  double flops = 0;            // matmul FLOPs; 0 for memory-bound kernels
  double bytes = 0;

  bool is_matmul() const { return op_class == ir::GEMM || op_class == ir::ATTENTION; }
};

// The variant of its class a kernel of this phase runs (program.proto).
ir::KernelVariant variant_of(ir::Phase phase);

// The IR form of a kernel: class, role, variant, shape, FLOPs and bytes.
ir::Compute to_compute(const Kernel& k);

inline constexpr int64_t kBf16 = 2;
inline constexpr int64_t kFp32 = 4;

// C[m,n] = A[m,k]·B[k,n]: 2·m·n·k FLOPs; reads A and B, writes C once.
Kernel gemm(ir::KernelRole role, ir::Phase phase, int64_t m, int64_t n, int64_t k);

// `batch` independent C[m,n] = A[m,k]·B[k,n] (one cuBLAS strided-batched
// call): 2·batch·m·n·k FLOPs, each operand read and the result written once
// per batch entry. Shape [m, n, k, batch] (batch omitted when 1).
Kernel batched_gemm(ir::KernelRole role, ir::Phase phase, int64_t batch, int64_t m, int64_t n, int64_t k);

// FlashAttention forward over batch × heads, seq_q × seq_kv, with kv_heads
// key/value heads (GQA). FLOPs: 4·b·sq·skv·heads·d, halved when causal.
Kernel attention_forward(ir::Phase phase, int64_t batch, int64_t heads, int64_t kv_heads, int64_t seq_q,
                         int64_t seq_kv, int64_t head_dim, bool causal);
// FlashAttention-2 backward: 5 matmuls (P recomputed) = 2.5× the forward.
Kernel attention_backward(int64_t batch, int64_t heads, int64_t kv_heads, int64_t seq_q, int64_t seq_kv,
                          int64_t head_dim, bool causal);

// A memory-bound kernel touching `elements` elements `accesses` times (reads
// plus writes) of `element_bytes` each.
Kernel memory_bound(ir::OpClass op_class, ir::KernelRole role, ir::Phase phase, std::vector<int64_t> shape,
                    double elements, double accesses, int64_t element_bytes = kBf16);

// Adam step over `parameters` (this rank's optimizer shard), memory-bound:
// read fp32 grad, master, m, v (16 B); write master, m, v (12 B) and the bf16
// weight (2 B): 30 bytes per parameter.
inline constexpr int64_t kAdamBytesPerParameter = 4 * kFp32 + 3 * kFp32 + kBf16;
Kernel adam_step(int64_t parameters);

}  // namespace lacuna::model
