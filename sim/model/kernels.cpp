#include "sim/model/kernels.h"

#include <utility>

namespace lacuna::model {

ir::KernelVariant variant_of(ir::Phase phase) {
  switch (phase) {
    case ir::BACKWARD_INPUT:
      return ir::VARIANT_BACKWARD_INPUT;
    case ir::BACKWARD_WEIGHT:
      return ir::VARIANT_BACKWARD_WEIGHT;
    default:
      return ir::VARIANT_FORWARD;
  }
}

ir::Compute to_compute(const Kernel& k) {
  ir::Compute c;
  c.set_op_class(k.op_class);
  c.set_role(k.role);
  c.set_variant(variant_of(k.phase));
  for (int64_t d : k.shape) c.add_shape(d);
  c.set_flops(k.flops);
  c.set_bytes(k.bytes);
  if (k.precision != scenario::PRECISION_UNSPECIFIED) c.set_precision(k.precision);
  return c;
}

Kernel gemm(ir::KernelRole role, ir::Phase phase, int64_t m, int64_t n, int64_t k) {
  Kernel g;
  g.op_class = ir::GEMM;
  g.role = role;
  g.phase = phase;
  g.shape = {m, n, k};
  const double md = static_cast<double>(m), nd = static_cast<double>(n), kd = static_cast<double>(k);
  g.flops = 2.0 * md * nd * kd;
  g.bytes = static_cast<double>(kBf16) * (md * kd + kd * nd + md * nd);
  return g;
}

Kernel batched_gemm(ir::KernelRole role, ir::Phase phase, int64_t batch, int64_t m, int64_t n, int64_t k) {
  Kernel g = gemm(role, phase, m, n, k);
  const double bd = static_cast<double>(batch);
  g.flops *= bd;
  g.bytes *= bd;
  if (batch > 1) g.shape.push_back(batch);
  return g;
}

namespace {

// Q (and O, dO, dQ) and K (and V, dK, dV) sizes in bytes, plus the fp32
// logsumexp per query row.
struct AttentionTensors {
  double q, kv, lse;
};

AttentionTensors tensors(int64_t batch, int64_t heads, int64_t kv_heads, int64_t seq_q, int64_t seq_kv,
                         int64_t head_dim) {
  const double b = static_cast<double>(batch), d = static_cast<double>(head_dim);
  return {b * static_cast<double>(seq_q * heads) * d * kBf16, b * static_cast<double>(seq_kv * kv_heads) * d * kBf16,
          b * static_cast<double>(seq_q * heads) * kFp32};
}

double attention_forward_flops(int64_t batch, int64_t heads, int64_t seq_q, int64_t seq_kv, int64_t head_dim,
                               bool causal, int64_t window) {
  // QKᵀ and P·V: 2 matmuls of 2·sq·skv·d each per head (FlashAttention paper).
  if (causal && window > 0 && window < seq_kv)
    return 4.0 * static_cast<double>(batch) * static_cast<double>(heads) * static_cast<double>(head_dim) *
           attention_score_pairs(seq_q, seq_kv, causal, window);
  const double full = 4.0 * static_cast<double>(batch) * static_cast<double>(seq_q) * static_cast<double>(seq_kv) *
                      static_cast<double>(heads) * static_cast<double>(head_dim);
  return causal ? full / 2.0 : full;
}

Kernel attention(ir::Phase phase, int64_t batch, int64_t heads, int64_t kv_heads, int64_t seq_q, int64_t seq_kv,
                 int64_t head_dim, bool causal, int64_t window) {
  Kernel a;
  a.op_class = ir::ATTENTION;
  a.role = ir::ROLE_ATTN_CORE;
  a.phase = phase;
  a.shape = {batch, heads, seq_q, seq_kv, head_dim, causal ? 1 : 0, kv_heads};
  // Only a window that cuts work is part of the shape, so that full-attention
  // shapes (and calibration tables keyed on them) stay as they were.
  if (window > 0 && window < seq_kv) a.shape.push_back(window);
  return a;
}

}  // namespace

double attention_score_pairs(int64_t seq_q, int64_t seq_kv, bool causal, int64_t window) {
  const double sq = static_cast<double>(seq_q), skv = static_cast<double>(seq_kv);
  if (!causal) return sq * skv;
  if (window <= 0 || window >= seq_kv) return sq * skv / 2.0;
  const double w = static_cast<double>(window);
  return sq * w - w * w / 2.0;
}

Kernel attention_forward(ir::Phase phase, int64_t batch, int64_t heads, int64_t kv_heads, int64_t seq_q,
                         int64_t seq_kv, int64_t head_dim, bool causal, int64_t window) {
  Kernel a = attention(phase, batch, heads, kv_heads, seq_q, seq_kv, head_dim, causal, window);
  a.flops = attention_forward_flops(batch, heads, seq_q, seq_kv, head_dim, causal, window);
  const auto t = tensors(batch, heads, kv_heads, seq_q, seq_kv, head_dim);
  a.bytes = t.q + 2 * t.kv + t.q + t.lse;  // read Q, K, V; write O and logsumexp
  return a;
}

Kernel attention_backward(int64_t batch, int64_t heads, int64_t kv_heads, int64_t seq_q, int64_t seq_kv,
                          int64_t head_dim, bool causal, int64_t window) {
  Kernel a = attention(ir::BACKWARD_INPUT, batch, heads, kv_heads, seq_q, seq_kv, head_dim, causal, window);
  // FA2 backward: S = QKᵀ (recompute), dV = Pᵀ·dO, dP = dO·Vᵀ, dQ = dS·K,
  // dK = dSᵀ·Q: five matmuls against the forward's two.
  a.flops = 2.5 * attention_forward_flops(batch, heads, seq_q, seq_kv, head_dim, causal, window);
  const auto t = tensors(batch, heads, kv_heads, seq_q, seq_kv, head_dim);
  // Read Q, K, V, O, dO, logsumexp; write dQ, dK, dV.
  a.bytes = 3 * t.q + 2 * t.kv + t.lse + t.q + 2 * t.kv;
  return a;
}

Kernel memory_bound(ir::OpClass op_class, ir::KernelRole role, ir::Phase phase, std::vector<int64_t> shape,
                    double elements, double accesses, int64_t element_bytes) {
  Kernel k;
  k.op_class = op_class;
  k.role = role;
  k.phase = phase;
  k.shape = std::move(shape);
  k.bytes = elements * accesses * static_cast<double>(element_bytes);
  return k;
}

Kernel adam_step(int64_t parameters) {
  return memory_bound(ir::OPTIMIZER, ir::ROLE_OPTIMIZER_STEP, ir::OPTIMIZER_STEP, {parameters},
                      static_cast<double>(parameters), kAdamBytesPerParameter, 1);
}

namespace {

// A streaming pass of `elements` × `bytes_per_element` bytes with a second
// shape entry naming its bytes per element, so that passes of different
// layouts stay distinct kernels (calibration keys on the shape).
Kernel stream(ir::OpClass op_class, ir::KernelRole role, ir::Phase phase, int64_t elements,
              int64_t bytes_per_element) {
  return memory_bound(op_class, role, phase, {elements, bytes_per_element}, static_cast<double>(elements),
                      static_cast<double>(bytes_per_element), 1);
}

}  // namespace

Kernel stream_pass(ir::KernelRole role, ir::Phase phase, int64_t elements, int64_t bytes_per_element) {
  return stream(ir::ELEMENTWISE, role, phase, elements, bytes_per_element);
}

Kernel grad_norm(int64_t parameters) {
  // multi_tensor_l2norm: a reduction reading every fp32 gradient once.
  return stream(ir::OPTIMIZER, ir::ROLE_GRAD_NORM, ir::OPTIMIZER_STEP, parameters, kFp32);
}

Kernel grad_clip(int64_t parameters) {
  // multi_tensor_scale in place: read and write every fp32 gradient.
  return stream(ir::OPTIMIZER, ir::ROLE_GRAD_CLIP, ir::OPTIMIZER_STEP, parameters, 2 * kFp32);
}

Kernel param_copy(int64_t parameters) {
  // fp32 master weight read, bf16 model weight written.
  return stream(ir::ELEMENTWISE, ir::ROLE_PARAM_COPY, ir::OPTIMIZER_STEP, parameters, kFp32 + kBf16);
}

Kernel grad_zero(int64_t parameters, int64_t grad_bytes) {
  // A memset of the main_grad buffer.
  return stream(ir::ELEMENTWISE, ir::ROLE_GRAD_ZERO, ir::DP_SYNC, parameters, grad_bytes);
}

Kernel grad_to_fp32(int64_t parameters) {
  return stream(ir::ELEMENTWISE, ir::ROLE_GRAD_TO_FP32, ir::OPTIMIZER_STEP, parameters, kBf16 + kFp32);
}

std::vector<Kernel> optimizer_update(int64_t parameters) {
  return {grad_norm(parameters), grad_clip(parameters), adam_step(parameters), param_copy(parameters)};
}

Kernel grad_unscale(int64_t parameters) {
  return stream(ir::OPTIMIZER, ir::ROLE_GRAD_UNSCALE, ir::OPTIMIZER_STEP, parameters, 2 * kFp32);
}

}  // namespace lacuna::model
