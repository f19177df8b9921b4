#include "sim/kernelfit/table_kernel.h"

#include "sim/core/error.h"
#include "sim/model/kernels.h"

namespace lacuna::kernelfit {
namespace {

double d(int64_t v) { return static_cast<double>(v); }

model::Kernel build(const MeasuredKernel& r) {
  const ir::Phase phase = phase_of(r.pass);
  const bool backward = r.pass != Pass::kForward;
  const std::vector<int64_t>& s = r.shape;
  switch (r.op_class) {
    case ir::GEMM:
      if (s.size() == 4 && s[3] > 1) return model::batched_gemm(ir::ROLE_UNSPECIFIED, phase, s[3], s[0], s[1], s[2]);
      return model::gemm(ir::ROLE_UNSPECIFIED, phase, s[0], s[1], s[2]);
    case ir::ATTENTION: {
      // IR order: batch, heads, seq_q, seq_kv, head_dim, causal, kv_heads(, window).
      const int64_t window = s.size() > 7 ? s[7] : 0;
      if (backward) return model::attention_backward(s[0], s[1], s[6], s[2], s[3], s[4], s[5] != 0, window);
      return model::attention_forward(ir::FORWARD, s[0], s[1], s[6], s[2], s[3], s[4], s[5] != 0, window);
    }
    case ir::LAYERNORM:
    case ir::RMSNORM:
      return model::memory_bound(r.op_class, ir::ROLE_UNSPECIFIED, phase, s, d(s[0] * s[1]), backward ? 3 : 2);
    case ir::SWIGLU:
      return model::memory_bound(ir::SWIGLU, ir::ROLE_UNSPECIFIED, phase, s, d(s[0] * s[1]), backward ? 5 : 3);
    case ir::GELU:
      return model::memory_bound(ir::GELU, ir::ROLE_UNSPECIFIED, phase, s, d(s[0]), backward ? 3 : 2);
    case ir::RESIDUAL_ADD:
      return model::memory_bound(ir::RESIDUAL_ADD, ir::ROLE_UNSPECIFIED, phase, s, d(s[0]), 3);
    case ir::SOFTMAX:
      return model::memory_bound(ir::SOFTMAX, ir::ROLE_UNSPECIFIED, phase, s, d(s[0] * s[1]), backward ? 3 : 2);
    case ir::CROSS_ENTROPY:
      // Forward: read the bf16 logits, write the fp32 softmax; backward: the
      // reverse (sim/model/layer.cpp, head_forward / head_backward).
      return model::memory_bound(ir::CROSS_ENTROPY, ir::ROLE_UNSPECIFIED, phase, s, d(s[0] * s[1]),
                                 model::kBf16 + model::kFp32, 1);
    case ir::EMBEDDING:
      if (backward)
        return model::memory_bound(ir::EMBEDDING, ir::ROLE_UNSPECIFIED, phase, s, d(s[0] * s[1]),
                                   model::kBf16 + 2 * model::kFp32, 1);
      return model::memory_bound(ir::EMBEDDING, ir::ROLE_UNSPECIFIED, phase, s, d(s[0] * s[1]), 2);
    case ir::OPTIMIZER:
      // [n]: fused Adam; [n, b]: a streaming pass of b bytes per parameter
      // (gradient norm, clip; sim/model/kernels.cpp).
      if (s.size() == 2)
        return model::memory_bound(ir::OPTIMIZER, ir::ROLE_UNSPECIFIED, phase, s, d(s[0]), d(s[1]), 1);
      return model::adam_step(s[0]);
    case ir::ELEMENTWISE:
      // [n, b]: a stream of b bytes per element (b is a handful); MoE's token
      // permute is [rows, hidden] (sim/model/moe.cpp): read and write bf16.
      if (s.size() == 2 && s[1] <= 16) return model::stream_pass(ir::ROLE_UNSPECIFIED, phase, s[0], s[1]);
      if (s.size() == 2) return model::memory_bound(ir::ELEMENTWISE, ir::ROLE_UNSPECIFIED, phase, s, d(s[0] * s[1]), 2);
      return model::memory_bound(ir::ELEMENTWISE, ir::ROLE_UNSPECIFIED, phase, s, d(s[0]), 2);
    default:
      break;
  }
  throw Error(SourceLocation{r.file, r.line, 0, "class"}, "no kernel formula for this class");
}

}  // namespace

ir::Compute kernel_of(const MeasuredKernel& row) {
  model::Kernel k = build(row);
  if (row.dtype == scenario::FP8) k.precision = scenario::FP8;
  return model::to_compute(k);
}

}  // namespace lacuna::kernelfit
