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
  // Which piece of a GEMM split for TP communication overlap (-1: whole);
  // lets a collective name the piece that consumes it (layer.h, Consumer).
  int32_t chunk = -1;
  // The precision the math runs in where it differs from the program's
  // (FP8 GEMMs of an FP8 program, sim/model/fp8.h); unspecified: the program's.
  scenario::Precision precision = scenario::PRECISION_UNSPECIFIED;
  // The host waits for the stream to drain before issuing this kernel
  // (Op.host_sync: a device-to-host copy the framework needs first, such as
  // Megatron-Core's MoE token counts, sim/model/moe.cpp).
  bool host_sync = false;

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
// key/value heads (GQA). FLOPs: 4·b·sq·skv·heads·d, halved when causal; with
// a sliding window w < skv (causal) each query sees at most w keys:
// 4·b·heads·d·(sq·w − w²/2) (equal to the causal count at w = skv). The
// window is the shape's 8th entry when set.
Kernel attention_forward(ir::Phase phase, int64_t batch, int64_t heads, int64_t kv_heads, int64_t seq_q,
                         int64_t seq_kv, int64_t head_dim, bool causal, int64_t window = 0);
// FlashAttention-2 backward: 5 matmuls (P recomputed) = 2.5× the forward.
Kernel attention_backward(int64_t batch, int64_t heads, int64_t kv_heads, int64_t seq_q, int64_t seq_kv,
                          int64_t head_dim, bool causal, int64_t window = 0);

// Query-key pairs an attention computes: sq·skv (full), sq·skv / 2 (causal),
// sq·w − w²/2 (causal with a window w < skv).
double attention_score_pairs(int64_t seq_q, int64_t seq_kv, bool causal, int64_t window);

// A memory-bound kernel touching `elements` elements `accesses` times (reads
// plus writes) of `element_bytes` each.
Kernel memory_bound(ir::OpClass op_class, ir::KernelRole role, ir::Phase phase, std::vector<int64_t> shape,
                    double elements, double accesses, int64_t element_bytes = kBf16);

// A streaming ELEMENTWISE pass (copies, casts, memsets, accumulations):
// `elements` × `bytes_per_element` HBM bytes; shape [elements,
// bytes_per_element] (program.proto). A dropout-like read-and-write bf16 pass
// keeps the one-entry shape [elements].
Kernel stream_pass(ir::KernelRole role, ir::Phase phase, int64_t elements, int64_t bytes_per_element);

// Adam step over `parameters` (this rank's optimizer shard), memory-bound
// (fused multi-tensor Adam): read fp32 grad, master, m, v (16 B); write
// master, m, v (12 B): 28 bytes per parameter. The bf16 model weights are
// written by a separate copy (param_copy).
inline constexpr int64_t kAdamBytesPerParameter = 4 * kFp32 + 3 * kFp32;
Kernel adam_step(int64_t parameters);

// The rest of Megatron-LM's optimizer step over `parameters` (docs/kernels.md
// #optimizer-step): the gradients' local sum of squares (read fp32 grad, 4 B),
// the clip (read + write fp32 grad, 8 B), the fp32 → bf16 copy of the master
// weights (read 4, write 2 B), and zeroing the fp32 gradient buffer (write
// 4 B) before the next iteration's first backward.
Kernel grad_norm(int64_t parameters);
Kernel grad_clip(int64_t parameters);
Kernel param_copy(int64_t parameters);
Kernel grad_zero(int64_t parameters, int64_t grad_bytes = kFp32);
// fp16 gradients (no fp32 accumulation) copied to fp32 main gradients before
// the step (read 2, write 4 B); fp16's loss-scale unscale with its inf check
// (read + write fp32, 8 B).
Kernel grad_to_fp32(int64_t parameters);
Kernel grad_unscale(int64_t parameters);

// One module's local update where the placement emits it on its own (the
// encoders of the heterogeneous placements): the gradient norm's local
// reduction and the clip, Adam, the fp32 → bf16 copy.
std::vector<Kernel> optimizer_update(int64_t parameters);

}  // namespace lacuna::model
