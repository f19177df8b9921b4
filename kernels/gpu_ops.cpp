// The public kernel functions of gpu_kernels.h (all but GEMM): argument checks
// (dtype, element counts, shape limits of the launch), then the launch
// wrapper, whose error code becomes a lacuna::Error naming the kernel. No CUDA
// header here: this file compiles the same with and without CUDA.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "kernels/gpu_kernels.h"
#include "kernels/gpu_launch.h"
#include "sim/core/error.h"

namespace lacuna::kernels::gpu {
namespace {

[[noreturn]] void fail(const char* fn, const std::string& what) {
  throw Error(std::string("gpu::") + fn + ": " + what);
}

void need(const char* fn, const char* name, const DeviceBuffer& b, DType t, int64_t elements) {
  if (b.empty()) fail(fn, std::string(name) + " is not allocated");
  if (b.dtype() != t)
    fail(fn, std::string(name) + " is " + dtype_name(b.dtype()) + ", expected " + dtype_name(t));
  if (b.size() != elements)
    fail(fn, std::string(name) + " has " + std::to_string(b.size()) + " elements, expected " +
                 std::to_string(elements));
}

void positive(const char* fn, const char* name, int64_t v) {
  if (v < 1) fail(fn, std::string(name) + " must be >= 1, got " + std::to_string(v));
}

int64_t product(const char* fn, int64_t a, int64_t b) {
  if (a > std::numeric_limits<int64_t>::max() / b) fail(fn, "element count overflows int64");
  return a * b;
}

// One block per row: grid.x holds up to 2^31 − 1 rows.
void row_grid(const char* fn, int64_t rows) {
  if (rows > std::numeric_limits<int32_t>::max()) fail(fn, std::to_string(rows) + " rows exceed the grid limit");
}

void check_launch(const char* kernel, int code) {
  if (code != 0) throw Error(std::string("CUDA kernel ") + kernel + " failed: " + launch::error_string(code));
}

float checked_eps(const char* fn, double eps) {
  if (!(eps >= 0.0)) fail(fn, "eps must be >= 0, got " + std::to_string(eps));
  return static_cast<float>(eps);
}

// t rows of h: both positive, t within the grid; returns t·h.
int64_t norm_elements(const char* fn, ref::NormShape s) {
  positive(fn, "t", s.t);
  positive(fn, "h", s.h);
  row_grid(fn, s.t);
  return product(fn, s.t, s.h);
}

}  // namespace

// ---------------------------------------------------------------- norms

void layernorm_forward(Context& ctx, const DeviceBuffer& x, const DeviceBuffer& gamma, const DeviceBuffer& beta,
                       ref::NormShape s, double eps, DeviceBuffer& y, DeviceBuffer& mean, DeviceBuffer& rstd) {
  const char* fn = "layernorm_forward";
  const int64_t n = norm_elements(fn, s);
  need(fn, "x", x, DType::kBf16, n);
  need(fn, "gamma", gamma, DType::kBf16, s.h);
  need(fn, "beta", beta, DType::kBf16, s.h);
  need(fn, "y", y, DType::kBf16, n);
  need(fn, "mean", mean, DType::kF32, s.t);
  need(fn, "rstd", rstd, DType::kF32, s.t);
  check_launch(fn, launch::layernorm_forward(ctx.stream(), x.data(), gamma.data(), beta.data(), s.t, s.h,
                                             checked_eps(fn, eps), y.data(), static_cast<float*>(mean.data()),
                                             static_cast<float*>(rstd.data())));
}

void layernorm_backward(Context& ctx, const DeviceBuffer& x, const DeviceBuffer& gamma, const DeviceBuffer& dy,
                        const DeviceBuffer& mean, const DeviceBuffer& rstd, ref::NormShape s, DeviceBuffer& dx,
                        DeviceBuffer& dgamma, DeviceBuffer& dbeta) {
  const char* fn = "layernorm_backward";
  const int64_t n = norm_elements(fn, s);
  need(fn, "x", x, DType::kBf16, n);
  need(fn, "gamma", gamma, DType::kBf16, s.h);
  need(fn, "dy", dy, DType::kBf16, n);
  need(fn, "mean", mean, DType::kF32, s.t);
  need(fn, "rstd", rstd, DType::kF32, s.t);
  need(fn, "dx", dx, DType::kBf16, n);
  need(fn, "dgamma", dgamma, DType::kF32, s.h);
  need(fn, "dbeta", dbeta, DType::kF32, s.h);
  check_launch(fn, launch::layernorm_backward(ctx.stream(), x.data(), gamma.data(), dy.data(),
                                              static_cast<const float*>(mean.data()),
                                              static_cast<const float*>(rstd.data()), s.t, s.h, dx.data(),
                                              static_cast<float*>(dgamma.data()), static_cast<float*>(dbeta.data())));
}

void rmsnorm_forward(Context& ctx, const DeviceBuffer& x, const DeviceBuffer& gamma, ref::NormShape s, double eps,
                     DeviceBuffer& y, DeviceBuffer& rstd) {
  const char* fn = "rmsnorm_forward";
  const int64_t n = norm_elements(fn, s);
  need(fn, "x", x, DType::kBf16, n);
  need(fn, "gamma", gamma, DType::kBf16, s.h);
  need(fn, "y", y, DType::kBf16, n);
  need(fn, "rstd", rstd, DType::kF32, s.t);
  check_launch(fn, launch::rmsnorm_forward(ctx.stream(), x.data(), gamma.data(), s.t, s.h, checked_eps(fn, eps),
                                           y.data(), static_cast<float*>(rstd.data())));
}

void rmsnorm_backward(Context& ctx, const DeviceBuffer& x, const DeviceBuffer& gamma, const DeviceBuffer& dy,
                      const DeviceBuffer& rstd, ref::NormShape s, DeviceBuffer& dx, DeviceBuffer& dgamma) {
  const char* fn = "rmsnorm_backward";
  const int64_t n = norm_elements(fn, s);
  need(fn, "x", x, DType::kBf16, n);
  need(fn, "gamma", gamma, DType::kBf16, s.h);
  need(fn, "dy", dy, DType::kBf16, n);
  need(fn, "rstd", rstd, DType::kF32, s.t);
  need(fn, "dx", dx, DType::kBf16, n);
  need(fn, "dgamma", dgamma, DType::kF32, s.h);
  check_launch(fn, launch::rmsnorm_backward(ctx.stream(), x.data(), gamma.data(), dy.data(),
                                            static_cast<const float*>(rstd.data()), s.t, s.h, dx.data(),
                                            static_cast<float*>(dgamma.data())));
}

// ---------------------------------------------------------------- activations

void gelu_forward(Context& ctx, const DeviceBuffer& x, DeviceBuffer& y) {
  const char* fn = "gelu_forward";
  need(fn, "x", x, DType::kBf16, x.size());
  need(fn, "y", y, DType::kBf16, x.size());
  check_launch(fn, launch::gelu_forward(ctx.stream(), x.data(), x.size(), y.data()));
}

void gelu_backward(Context& ctx, const DeviceBuffer& x, const DeviceBuffer& dy, DeviceBuffer& dx) {
  const char* fn = "gelu_backward";
  need(fn, "x", x, DType::kBf16, x.size());
  need(fn, "dy", dy, DType::kBf16, x.size());
  need(fn, "dx", dx, DType::kBf16, x.size());
  check_launch(fn, launch::gelu_backward(ctx.stream(), x.data(), dy.data(), x.size(), dx.data()));
}

void swiglu_forward(Context& ctx, const DeviceBuffer& x, int64_t t, int64_t f, DeviceBuffer& y) {
  const char* fn = "swiglu_forward";
  positive(fn, "t", t);
  positive(fn, "f", f);
  const int64_t n = product(fn, t, f);
  need(fn, "x", x, DType::kBf16, product(fn, n, 2));
  need(fn, "y", y, DType::kBf16, n);
  check_launch(fn, launch::swiglu_forward(ctx.stream(), x.data(), t, f, y.data()));
}

void swiglu_backward(Context& ctx, const DeviceBuffer& x, const DeviceBuffer& dy, int64_t t, int64_t f,
                     DeviceBuffer& dx) {
  const char* fn = "swiglu_backward";
  positive(fn, "t", t);
  positive(fn, "f", f);
  const int64_t n = product(fn, t, f);
  need(fn, "x", x, DType::kBf16, product(fn, n, 2));
  need(fn, "dy", dy, DType::kBf16, n);
  need(fn, "dx", dx, DType::kBf16, product(fn, n, 2));
  check_launch(fn, launch::swiglu_backward(ctx.stream(), x.data(), dy.data(), t, f, dx.data()));
}

void residual_add(Context& ctx, const DeviceBuffer& a, const DeviceBuffer& b, DeviceBuffer& out) {
  const char* fn = "residual_add";
  need(fn, "a", a, DType::kBf16, a.size());
  need(fn, "b", b, DType::kBf16, a.size());
  need(fn, "out", out, DType::kBf16, a.size());
  check_launch(fn, launch::residual_add(ctx.stream(), a.data(), b.data(), a.size(), out.data()));
}

// ---------------------------------------------------------------- cross-entropy

void cross_entropy_forward(Context& ctx, const DeviceBuffer& logits, const DeviceBuffer& targets, ref::CeShape s,
                           DeviceBuffer& loss, DeviceBuffer& lse) {
  const char* fn = "cross_entropy_forward";
  positive(fn, "t", s.t);
  positive(fn, "v", s.v);
  row_grid(fn, s.t);
  need(fn, "logits", logits, DType::kBf16, product(fn, s.t, s.v));
  need(fn, "targets", targets, DType::kI32, s.t);
  need(fn, "loss", loss, DType::kF32, s.t);
  need(fn, "lse", lse, DType::kF32, s.t);
  check_launch(fn, launch::cross_entropy_forward(ctx.stream(), logits.data(),
                                                 static_cast<const int32_t*>(targets.data()), s.t, s.v,
                                                 static_cast<float*>(loss.data()), static_cast<float*>(lse.data())));
}

void cross_entropy_backward(Context& ctx, const DeviceBuffer& logits, const DeviceBuffer& targets,
                            const DeviceBuffer& lse, const DeviceBuffer& dloss, ref::CeShape s,
                            DeviceBuffer& dlogits) {
  const char* fn = "cross_entropy_backward";
  positive(fn, "t", s.t);
  positive(fn, "v", s.v);
  row_grid(fn, s.t);
  const int64_t n = product(fn, s.t, s.v);
  need(fn, "logits", logits, DType::kBf16, n);
  need(fn, "targets", targets, DType::kI32, s.t);
  need(fn, "lse", lse, DType::kF32, s.t);
  need(fn, "dloss", dloss, DType::kF32, s.t);
  need(fn, "dlogits", dlogits, DType::kBf16, n);
  check_launch(fn, launch::cross_entropy_backward(ctx.stream(), logits.data(),
                                                  static_cast<const int32_t*>(targets.data()),
                                                  static_cast<const float*>(lse.data()),
                                                  static_cast<const float*>(dloss.data()), s.t, s.v,
                                                  dlogits.data()));
}

// ---------------------------------------------------------------- attention

namespace {

launch::AttentionDims attention_dims(const char* fn, const AttentionShape& s) {
  s.validate();  // throws lacuna::Error "attention: ..."
  if (s.head_dim > 256) fail(fn, "head_dim " + std::to_string(s.head_dim) + " > 256 is not supported");
  if (s.heads > 65535 || s.kv_heads > 65535 || s.batch > 65535)
    fail(fn, "batch and heads must be <= 65535 (grid y/z limits)");
  const int64_t blocks = (std::max(s.seq_q, s.seq_kv) + 7) / 8;
  if (blocks > std::numeric_limits<int32_t>::max()) fail(fn, "sequence too long for the grid");
  const double scale = s.scale();
  return {s.batch, s.heads, s.kv_heads, s.seq_q, s.seq_kv, s.head_dim, s.causal, static_cast<float>(scale)};
}

}  // namespace

void attention_forward(Context& ctx, const AttentionShape& s, const DeviceBuffer& q, const DeviceBuffer& k,
                       const DeviceBuffer& v, DeviceBuffer& o, DeviceBuffer& lse) {
  const char* fn = "attention_forward";
  const launch::AttentionDims d = attention_dims(fn, s);
  need(fn, "Q", q, DType::kBf16, s.q_elements());
  need(fn, "K", k, DType::kBf16, s.kv_elements());
  need(fn, "V", v, DType::kBf16, s.kv_elements());
  need(fn, "O", o, DType::kBf16, s.q_elements());
  need(fn, "LSE", lse, DType::kF32, s.lse_elements());
  check_launch(fn, launch::attention_forward(ctx.stream(), d, q.data(), k.data(), v.data(), o.data(),
                                             static_cast<float*>(lse.data())));
}

int64_t attention_backward_workspace_elements(const AttentionShape& s) { return s.lse_elements(); }

void attention_backward(Context& ctx, const AttentionShape& s, const DeviceBuffer& q, const DeviceBuffer& k,
                        const DeviceBuffer& v, const DeviceBuffer& o, const DeviceBuffer& lse,
                        const DeviceBuffer& dout, DeviceBuffer& dq, DeviceBuffer& dk, DeviceBuffer& dv,
                        DeviceBuffer& workspace) {
  const char* fn = "attention_backward";
  const launch::AttentionDims d = attention_dims(fn, s);
  need(fn, "Q", q, DType::kBf16, s.q_elements());
  need(fn, "K", k, DType::kBf16, s.kv_elements());
  need(fn, "V", v, DType::kBf16, s.kv_elements());
  need(fn, "O", o, DType::kBf16, s.q_elements());
  need(fn, "LSE", lse, DType::kF32, s.lse_elements());
  need(fn, "dO", dout, DType::kBf16, s.q_elements());
  need(fn, "dQ", dq, DType::kBf16, s.q_elements());
  need(fn, "dK", dk, DType::kBf16, s.kv_elements());
  need(fn, "dV", dv, DType::kBf16, s.kv_elements());
  need(fn, "workspace", workspace, DType::kF32, attention_backward_workspace_elements(s));
  check_launch(fn, launch::attention_backward(ctx.stream(), d, q.data(), k.data(), v.data(), o.data(),
                                              static_cast<const float*>(lse.data()), dout.data(), dq.data(),
                                              dk.data(), dv.data(), static_cast<float*>(workspace.data())));
}

// ---------------------------------------------------------------- misc

void softmax_forward(Context& ctx, const DeviceBuffer& x, int64_t rows, int64_t cols, float scale,
                     DeviceBuffer& y) {
  const char* fn = "softmax_forward";
  positive(fn, "rows", rows);
  positive(fn, "cols", cols);
  row_grid(fn, rows);
  const int64_t n = product(fn, rows, cols);
  need(fn, "x", x, DType::kBf16, n);
  need(fn, "y", y, DType::kBf16, n);
  check_launch(fn, launch::softmax_forward(ctx.stream(), x.data(), rows, cols, scale, y.data()));
}

void softmax_backward(Context& ctx, const DeviceBuffer& y, const DeviceBuffer& dy, int64_t rows, int64_t cols,
                      float scale, DeviceBuffer& dx) {
  const char* fn = "softmax_backward";
  positive(fn, "rows", rows);
  positive(fn, "cols", cols);
  row_grid(fn, rows);
  const int64_t n = product(fn, rows, cols);
  need(fn, "y", y, DType::kBf16, n);
  need(fn, "dy", dy, DType::kBf16, n);
  need(fn, "dx", dx, DType::kBf16, n);
  check_launch(fn, launch::softmax_backward(ctx.stream(), y.data(), dy.data(), rows, cols, scale, dx.data()));
}

void scale_copy(Context& ctx, const DeviceBuffer& x, float alpha, DeviceBuffer& y) {
  const char* fn = "scale_copy";
  need(fn, "x", x, DType::kBf16, x.size());
  need(fn, "y", y, DType::kBf16, x.size());
  check_launch(fn, launch::scale_copy(ctx.stream(), x.data(), x.size(), alpha, y.data()));
}

void adam_step(Context& ctx, DeviceBuffer& params, const DeviceBuffer& grads, DeviceBuffer& m, DeviceBuffer& v,
               const AdamParams& p, DeviceBuffer& weights_bf16) {
  const char* fn = "adam_step";
  const int64_t n = params.size();
  need(fn, "params", params, DType::kF32, n);
  need(fn, "grads", grads, DType::kF32, n);
  need(fn, "m", m, DType::kF32, n);
  need(fn, "v", v, DType::kF32, n);
  need(fn, "weights_bf16", weights_bf16, DType::kBf16, n);
  if (p.step < 1) fail(fn, "step must be >= 1, got " + std::to_string(p.step));
  if (!(p.beta1 >= 0.0f && p.beta1 < 1.0f && p.beta2 >= 0.0f && p.beta2 < 1.0f))
    fail(fn, "beta1 and beta2 must be in [0, 1)");
  const double bias1 = 1.0 - std::pow(static_cast<double>(p.beta1), p.step);
  const double bias2 = 1.0 - std::pow(static_cast<double>(p.beta2), p.step);
  check_launch(fn, launch::adam_step(ctx.stream(), static_cast<float*>(params.data()),
                                     static_cast<const float*>(grads.data()), static_cast<float*>(m.data()),
                                     static_cast<float*>(v.data()), n, p.lr, p.beta1, p.beta2, p.eps,
                                     p.weight_decay, static_cast<float>(bias1), static_cast<float>(bias2),
                                     weights_bf16.data()));
}

void embedding_forward(Context& ctx, const DeviceBuffer& ids, const DeviceBuffer& table, int64_t tokens,
                       int64_t hidden, int64_t vocab, DeviceBuffer& out) {
  const char* fn = "embedding_forward";
  positive(fn, "tokens", tokens);
  positive(fn, "hidden", hidden);
  positive(fn, "vocab", vocab);
  need(fn, "ids", ids, DType::kI32, tokens);
  need(fn, "table", table, DType::kBf16, product(fn, vocab, hidden));
  need(fn, "out", out, DType::kBf16, product(fn, tokens, hidden));
  check_launch(fn, launch::embedding_forward(ctx.stream(), static_cast<const int32_t*>(ids.data()), table.data(),
                                             tokens, hidden, vocab, out.data()));
}

void embedding_backward(Context& ctx, const DeviceBuffer& ids, const DeviceBuffer& dy, int64_t tokens,
                        int64_t hidden, int64_t vocab, DeviceBuffer& dtable) {
  const char* fn = "embedding_backward";
  positive(fn, "tokens", tokens);
  positive(fn, "hidden", hidden);
  positive(fn, "vocab", vocab);
  need(fn, "ids", ids, DType::kI32, tokens);
  need(fn, "dy", dy, DType::kBf16, product(fn, tokens, hidden));
  need(fn, "dtable", dtable, DType::kF32, product(fn, vocab, hidden));
  check_launch(fn, launch::embedding_backward(ctx.stream(), static_cast<const int32_t*>(ids.data()), dy.data(),
                                              tokens, hidden, vocab, static_cast<float*>(dtable.data())));
}

}  // namespace lacuna::kernels::gpu
