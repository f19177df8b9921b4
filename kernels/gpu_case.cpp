#include "kernels/gpu_case.h"

#include <algorithm>
#include <functional>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "sim/core/error.h"

namespace lacuna::kernels {
namespace {

using gpu::Context;
using gpu::DeviceBuffer;
using gpu::DType;

[[noreturn]] void unsupported(const ir::Compute& op, const std::string& why) {
  throw Error("no GPU kernel for " + describe_op(op) + ": " + why);
}

void expect_rank(const ir::Compute& op, std::initializer_list<int> ranks, const char* layout) {
  if (std::find(ranks.begin(), ranks.end(), op.shape_size()) == ranks.end())
    unsupported(op, std::string("the shape must be ") + layout);
  for (int64_t d : op.shape())
    if (d < 0) unsupported(op, "negative shape entry");
}

void expect_variant(const ir::Compute& op, std::initializer_list<ir::KernelVariant> variants) {
  if (std::find(variants.begin(), variants.end(), op.variant()) == variants.end())
    unsupported(op, std::string("variant ") + ir::KernelVariant_Name(op.variant()) + " is not a kernel of this class");
}

int64_t dim(const ir::Compute& op, int i) {
  const int64_t v = op.shape(i);
  if (v < 1) unsupported(op, "shape entry " + std::to_string(i) + " must be >= 1");
  return v;
}

int64_t mul(const ir::Compute& op, int64_t a, int64_t b) {
  if (a > std::numeric_limits<int64_t>::max() / b) unsupported(op, "element count overflows int64");
  return a * b;
}

// ---------------------------------------------------------------- recipes

enum class Init { kNone, kSigned, kPositive, kIndices, kZero };

struct Spec {
  DType dtype;
  int64_t elements;
  Init init;
  int32_t bound = 1;  // kIndices: values in [0, bound)
};

using Set = std::vector<DeviceBuffer>;

struct Recipe {
  std::string description;
  std::vector<Spec> buffers;
  std::function<void(Context&, Set&)> prepare;  // optional, once per set after the fill
  std::function<void(Context&, Set&)> launch;
};

Spec in_bf16(int64_t n) { return {DType::kBf16, n, Init::kSigned}; }
Spec out_bf16(int64_t n) { return {DType::kBf16, n, Init::kNone}; }
Spec in_f32(int64_t n, bool positive = false) { return {DType::kF32, n, positive ? Init::kPositive : Init::kSigned}; }
Spec out_f32(int64_t n) { return {DType::kF32, n, Init::kNone}; }
Spec indices(const ir::Compute& op, int64_t n, int64_t bound) {
  if (bound > std::numeric_limits<int32_t>::max()) unsupported(op, "index bound exceeds int32");
  return {DType::kI32, n, Init::kIndices, static_cast<int32_t>(bound)};
}

bool forward(const ir::Compute& op) { return op.variant() == ir::VARIANT_FORWARD; }

Recipe gemm_recipe(const ir::Compute& op) {
  expect_rank(op, {3, 4}, "[m, n, k] or [m, n, k, batch]");
  ref::GemmShape s{dim(op, 0), dim(op, 1), dim(op, 2), false, false};
  const int64_t batch = op.shape_size() == 4 ? dim(op, 3) : 1;
  // The three products of a linear layer (sim/model/layer.cpp).
  if (op.variant() == ir::VARIANT_BACKWARD_INPUT) s.trans_b = true;        // dX = dY·Wᵀ
  else if (op.variant() == ir::VARIANT_BACKWARD_WEIGHT) s.trans_a = true;  // dW = Xᵀ·dY
  else expect_variant(op, {ir::VARIANT_FORWARD});
  Recipe r;
  r.description = describe_op(op) + " bf16 cuBLAS";
  r.buffers = {in_bf16(mul(op, mul(op, s.m, s.k), batch)), in_bf16(mul(op, mul(op, s.k, s.n), batch)),
               out_bf16(mul(op, mul(op, s.m, s.n), batch))};
  r.launch = [s, batch](Context& ctx, Set& b) {
    if (batch > 1)
      gpu::gemm_batched(ctx, b[0], b[1], s, batch, b[2]);
    else
      gpu::gemm(ctx, b[0], b[1], s, b[2]);
  };
  return r;
}

Recipe attention_recipe(const ir::Compute& op) {
  expect_rank(op, {7}, "[batch, heads, seq_q, seq_kv, head_dim, causal, kv_heads]");
  expect_variant(op, {ir::VARIANT_FORWARD, ir::VARIANT_BACKWARD_INPUT});
  if (op.shape(5) != 0 && op.shape(5) != 1) unsupported(op, "causal (shape[5]) must be 0 or 1");
  AttentionShape s;
  s.batch = dim(op, 0);
  s.heads = dim(op, 1);
  s.seq_q = dim(op, 2);
  s.seq_kv = dim(op, 3);
  s.head_dim = dim(op, 4);
  s.causal = op.shape(5) == 1;
  s.kv_heads = dim(op, 6);
  try {
    s.validate();
  } catch (const Error& e) {
    unsupported(op, e.what());
  }
  if (s.head_dim > 256) unsupported(op, "head_dim > 256 is not supported by the attention kernel");
  Recipe r;
  r.description = describe_op(op) + " bf16 flash";
  const int64_t nq = s.q_elements(), nkv = s.kv_elements(), nl = s.lse_elements();
  if (forward(op)) {
    r.buffers = {in_bf16(nq), in_bf16(nkv), in_bf16(nkv), out_bf16(nq), out_f32(nl)};
    r.launch = [s](Context& ctx, Set& b) { gpu::attention_forward(ctx, s, b[0], b[1], b[2], b[3], b[4]); };
    return r;
  }
  // q, k, v, o, lse, dO, dq, dk, dv, workspace; O and LSE from a real forward.
  r.buffers = {in_bf16(nq),  in_bf16(nkv),  in_bf16(nkv),  out_bf16(nq), out_f32(nl),
               in_bf16(nq),  out_bf16(nq),  out_bf16(nkv), out_bf16(nkv),
               out_f32(gpu::attention_backward_workspace_elements(s))};
  r.prepare = [s](Context& ctx, Set& b) { gpu::attention_forward(ctx, s, b[0], b[1], b[2], b[3], b[4]); };
  r.launch = [s](Context& ctx, Set& b) {
    gpu::attention_backward(ctx, s, b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9]);
  };
  return r;
}

constexpr double kNormEps = 1e-5;

Recipe norm_recipe(const ir::Compute& op, bool layernorm) {
  expect_rank(op, {2}, "[tokens, hidden]");
  expect_variant(op, {ir::VARIANT_FORWARD, ir::VARIANT_BACKWARD_INPUT});
  const ref::NormShape s{dim(op, 0), dim(op, 1)};
  const int64_t n = mul(op, s.t, s.h);
  Recipe r;
  r.description = describe_op(op) + " bf16";
  if (layernorm && forward(op)) {
    r.buffers = {in_bf16(n), in_bf16(s.h), in_bf16(s.h), out_bf16(n), out_f32(s.t), out_f32(s.t)};
    r.launch = [s](Context& ctx, Set& b) {
      gpu::layernorm_forward(ctx, b[0], b[1], b[2], s, kNormEps, b[3], b[4], b[5]);
    };
  } else if (layernorm) {
    // x, gamma, dy, mean, rstd (> 0), dx, dgamma, dbeta
    r.buffers = {in_bf16(n), in_bf16(s.h), in_bf16(n), in_f32(s.t), in_f32(s.t, true),
                 out_bf16(n), out_f32(s.h), out_f32(s.h)};
    r.launch = [s](Context& ctx, Set& b) {
      gpu::layernorm_backward(ctx, b[0], b[1], b[2], b[3], b[4], s, b[5], b[6], b[7]);
    };
  } else if (forward(op)) {
    r.buffers = {in_bf16(n), in_bf16(s.h), out_bf16(n), out_f32(s.t)};
    r.launch = [s](Context& ctx, Set& b) { gpu::rmsnorm_forward(ctx, b[0], b[1], s, kNormEps, b[2], b[3]); };
  } else {
    r.buffers = {in_bf16(n), in_bf16(s.h), in_bf16(n), in_f32(s.t, true), out_bf16(n), out_f32(s.h)};
    r.launch = [s](Context& ctx, Set& b) { gpu::rmsnorm_backward(ctx, b[0], b[1], b[2], b[3], s, b[4], b[5]); };
  }
  return r;
}

Recipe gelu_recipe(const ir::Compute& op) {
  expect_rank(op, {1}, "[elements]");
  expect_variant(op, {ir::VARIANT_FORWARD, ir::VARIANT_BACKWARD_INPUT});
  const int64_t n = dim(op, 0);
  Recipe r;
  r.description = describe_op(op) + " bf16";
  if (forward(op)) {
    r.buffers = {in_bf16(n), out_bf16(n)};
    r.launch = [](Context& ctx, Set& b) { gpu::gelu_forward(ctx, b[0], b[1]); };
  } else {
    r.buffers = {in_bf16(n), in_bf16(n), out_bf16(n)};
    r.launch = [](Context& ctx, Set& b) { gpu::gelu_backward(ctx, b[0], b[1], b[2]); };
  }
  return r;
}

Recipe swiglu_recipe(const ir::Compute& op) {
  expect_rank(op, {2}, "[tokens, ffn_per_rank]");
  expect_variant(op, {ir::VARIANT_FORWARD, ir::VARIANT_BACKWARD_INPUT});
  const int64_t t = dim(op, 0), f = dim(op, 1);
  const int64_t n = mul(op, t, f), n2 = mul(op, n, 2);
  Recipe r;
  r.description = describe_op(op) + " bf16";
  if (forward(op)) {
    r.buffers = {in_bf16(n2), out_bf16(n)};
    r.launch = [t, f](Context& ctx, Set& b) { gpu::swiglu_forward(ctx, b[0], t, f, b[1]); };
  } else {
    r.buffers = {in_bf16(n2), in_bf16(n), out_bf16(n2)};
    r.launch = [t, f](Context& ctx, Set& b) { gpu::swiglu_backward(ctx, b[0], b[1], t, f, b[2]); };
  }
  return r;
}

// RESIDUAL_ADD (both variants: the backward is the same add of two gradient
// paths) and ELEMENTWISE (y = x / (1 − p), a dropout-like scale pass).
// A streaming pass [elements, bytes_per_element] (ELEMENTWISE copies, casts,
// memsets, accumulations; OPTIMIZER norm / clip passes): a bf16 scale copy
// moving the same bytes (2 read + 2 written per 4 bytes).
Recipe stream_recipe(const ir::Compute& op) {
  const int64_t bytes = mul(op, dim(op, 0), dim(op, 1));
  const int64_t n = std::max<int64_t>((bytes + 3) / 4, 1);
  Recipe r;
  r.description = describe_op(op) + " stream";
  r.buffers = {in_bf16(n), out_bf16(n)};
  r.launch = [](Context& ctx, Set& b) { gpu::scale_copy(ctx, b[0], 0.5f, b[1]); };
  return r;
}

Recipe elementwise_recipe(const ir::Compute& op, bool residual) {
  if (!residual && op.shape_size() == 2) return stream_recipe(op);
  expect_rank(op, {1}, "[elements]");
  expect_variant(op, {ir::VARIANT_FORWARD, ir::VARIANT_BACKWARD_INPUT});
  const int64_t n = dim(op, 0);
  Recipe r;
  r.description = describe_op(op) + " bf16";
  if (residual) {
    r.buffers = {in_bf16(n), in_bf16(n), out_bf16(n)};
    r.launch = [](Context& ctx, Set& b) { gpu::residual_add(ctx, b[0], b[1], b[2]); };
  } else {
    r.buffers = {in_bf16(n), out_bf16(n)};
    r.launch = [](Context& ctx, Set& b) { gpu::scale_copy(ctx, b[0], 1.0f / 0.9f, b[1]); };
  }
  return r;
}

Recipe cross_entropy_recipe(const ir::Compute& op) {
  expect_rank(op, {2}, "[tokens, vocab_per_rank]");
  expect_variant(op, {ir::VARIANT_FORWARD, ir::VARIANT_BACKWARD_INPUT});
  const ref::CeShape s{dim(op, 0), dim(op, 1)};
  const int64_t n = mul(op, s.t, s.v);
  Recipe r;
  r.description = describe_op(op) + " bf16";
  if (forward(op)) {
    r.buffers = {in_bf16(n), indices(op, s.t, s.v), out_f32(s.t), out_f32(s.t)};
    r.launch = [s](Context& ctx, Set& b) { gpu::cross_entropy_forward(ctx, b[0], b[1], s, b[2], b[3]); };
    return r;
  }
  // logits, targets, lse, dloss, dlogits; the lse from a real forward (its
  // loss output lands in dloss, then refilled).
  r.buffers = {in_bf16(n), indices(op, s.t, s.v), out_f32(s.t), in_f32(s.t, true), out_bf16(n)};
  r.prepare = [s](Context& ctx, Set& b) {
    gpu::cross_entropy_forward(ctx, b[0], b[1], s, b[3], b[2]);
    b[3].fill_random(0xce, 0.5f, 1.5f, false);
  };
  r.launch = [s](Context& ctx, Set& b) { gpu::cross_entropy_backward(ctx, b[0], b[1], b[2], b[3], s, b[4]); };
  return r;
}

Recipe softmax_recipe(const ir::Compute& op) {
  expect_rank(op, {2}, "[rows, cols]");
  expect_variant(op, {ir::VARIANT_FORWARD, ir::VARIANT_BACKWARD_INPUT});
  const int64_t rows = dim(op, 0), cols = dim(op, 1);
  const int64_t n = mul(op, rows, cols);
  constexpr float kScale = 1.0f;
  Recipe r;
  r.description = describe_op(op) + " bf16";
  if (forward(op)) {
    r.buffers = {in_bf16(n), out_bf16(n)};
    r.launch = [rows, cols](Context& ctx, Set& b) { gpu::softmax_forward(ctx, b[0], rows, cols, kScale, b[1]); };
    return r;
  }
  // y (a real softmax output), dy, dx.
  r.buffers = {out_bf16(n), in_bf16(n), out_bf16(n)};
  r.prepare = [rows, cols](Context& ctx, Set& b) {
    gpu::softmax_forward(ctx, b[1], rows, cols, kScale, b[0]);
  };
  r.launch = [rows, cols](Context& ctx, Set& b) {
    gpu::softmax_backward(ctx, b[0], b[1], rows, cols, kScale, b[2]);
  };
  return r;
}

Recipe embedding_recipe(const ir::Compute& op) {
  expect_rank(op, {3}, "[tokens, hidden, vocab_per_rank]");
  expect_variant(op, {ir::VARIANT_FORWARD, ir::VARIANT_BACKWARD_WEIGHT});
  const int64_t t = dim(op, 0), h = dim(op, 1), v = dim(op, 2);
  Recipe r;
  r.description = describe_op(op) + " bf16";
  if (forward(op)) {
    r.buffers = {indices(op, t, v), in_bf16(mul(op, v, h)), out_bf16(mul(op, t, h))};
    r.launch = [t, h, v](Context& ctx, Set& b) { gpu::embedding_forward(ctx, b[0], b[1], t, h, v, b[2]); };
  } else {
    r.buffers = {indices(op, t, v), in_bf16(mul(op, t, h)), {DType::kF32, mul(op, v, h), Init::kZero}};
    r.launch = [t, h, v](Context& ctx, Set& b) { gpu::embedding_backward(ctx, b[0], b[1], t, h, v, b[2]); };
  }
  return r;
}

Recipe optimizer_recipe(const ir::Compute& op) {
  if (op.shape_size() == 2) return stream_recipe(op);
  expect_rank(op, {1}, "[parameters]");
  expect_variant(op, {ir::VARIANT_FORWARD});
  const int64_t n = dim(op, 0);
  Recipe r;
  r.description = describe_op(op) + " fp32 AdamW";
  // params, grads, m, v (> 0), bf16 weights
  r.buffers = {in_f32(n), in_f32(n), in_f32(n), in_f32(n, true), out_bf16(n)};
  r.launch = [](Context& ctx, Set& b) { gpu::adam_step(ctx, b[0], b[1], b[2], b[3], gpu::AdamParams{}, b[4]); };
  return r;
}

Recipe recipe_for(const ir::Compute& op) {
  switch (op.op_class()) {
    case ir::GEMM:
      return gemm_recipe(op);
    case ir::ATTENTION:
      return attention_recipe(op);
    case ir::LAYERNORM:
      return norm_recipe(op, true);
    case ir::RMSNORM:
      return norm_recipe(op, false);
    case ir::GELU:
      return gelu_recipe(op);
    case ir::SWIGLU:
      return swiglu_recipe(op);
    case ir::RESIDUAL_ADD:
      return elementwise_recipe(op, true);
    case ir::ELEMENTWISE:
      return elementwise_recipe(op, false);
    case ir::CROSS_ENTROPY:
      return cross_entropy_recipe(op);
    case ir::SOFTMAX:
      return softmax_recipe(op);
    case ir::EMBEDDING:
      return embedding_recipe(op);
    case ir::OPTIMIZER:
      return optimizer_recipe(op);
    default:
      unsupported(op, "unknown op class");
  }
}

// ---------------------------------------------------------------- the case

// One input set's device bytes: the sum of the recipe's buffers.
int64_t set_bytes(const Recipe& recipe) {
  int64_t per_set = 0;
  for (const Spec& s : recipe.buffers) {
    const int64_t width = gpu::dtype_bytes(s.dtype);
    if (s.elements > std::numeric_limits<int64_t>::max() / width) throw Error(recipe.description + ": too large");
    const int64_t bytes = s.elements * width;
    if (per_set > std::numeric_limits<int64_t>::max() - bytes) throw Error(recipe.description + ": too large");
    per_set += bytes;
  }
  return per_set;
}

class GpuCase final : public KernelCase, public GpuEnqueueCase {
 public:
  GpuCase(Recipe recipe, Context& ctx, const GpuCaseOptions& options) : recipe_(std::move(recipe)), ctx_(ctx) {
    const int64_t per_set = set_bytes(recipe_);
    const auto budget = static_cast<int64_t>(options.max_free_fraction * static_cast<double>(ctx.free_memory_bytes()));
    int sets = 0;
    try {
      sets = gpu_case_set_count(per_set, ctx.l2_cache_bytes(), budget, options.max_sets);
    } catch (const Error& e) {
      throw Error(recipe_.description + " on " + ctx.device_name() + ": " + e.what());
    }
    uint64_t seed = options.seed;
    for (int i = 0; i < sets; ++i) {
      Set set;
      set.reserve(recipe_.buffers.size());
      for (const Spec& s : recipe_.buffers) {
        DeviceBuffer b(ctx, s.dtype, s.elements);
        ++seed;  // every buffer of every set gets its own values
        switch (s.init) {
          case Init::kSigned:
            b.fill_random(seed, 0.5f, 1.5f, true);
            break;
          case Init::kPositive:
            b.fill_random(seed, 0.5f, 1.5f, false);
            break;
          case Init::kIndices:
            b.fill_indices(seed, s.bound);
            break;
          case Init::kZero:
            b.zero();
            break;
          case Init::kNone:
            break;
        }
        set.push_back(std::move(b));
      }
      if (recipe_.prepare) recipe_.prepare(ctx, set);
      sets_.push_back(std::move(set));
    }
    ctx.synchronize();  // setup faults surface here, not in the first timing
    resident_ = per_set * sets;
  }

  double run_once_ns() override {
    Set& set = sets_[next_];
    next_ = (next_ + 1) % sets_.size();
    return ctx_.time_ns([&] { recipe_.launch(ctx_, set); });
  }

  void enqueue() override {
    Set& set = sets_[next_];
    next_ = (next_ + 1) % sets_.size();
    recipe_.launch(ctx_, set);
  }

  std::string describe() const override { return recipe_.description; }
  int64_t resident_bytes() const override { return resident_; }

 private:
  Recipe recipe_;
  Context& ctx_;
  std::vector<Set> sets_;
  size_t next_ = 0;
  int64_t resident_ = 0;
};

}  // namespace

int gpu_case_set_count(int64_t per_set_bytes, int64_t l2_bytes, int64_t budget_bytes, int max_sets) {
  if (per_set_bytes < 1) throw Error("gpu case: an input set of " + std::to_string(per_set_bytes) + " bytes");
  if (max_sets < 1) throw Error("gpu case: max_sets must be >= 1, got " + std::to_string(max_sets));
  if (per_set_bytes > budget_bytes)
    throw Error("one input set needs " + std::to_string(per_set_bytes) + " bytes, more than the " +
                std::to_string(budget_bytes) + "-byte budget (a quarter of the free device memory)");
  // The fewest n with n·per_set > 2·L2.
  const int64_t want = std::max<int64_t>(l2_bytes, 0) * 2 / per_set_bytes + 1;
  const int64_t fit = budget_bytes / per_set_bytes;
  return static_cast<int>(std::max<int64_t>(1, std::min({want, fit, static_cast<int64_t>(max_sets)})));
}

int64_t gpu_case_set_bytes(const ir::Compute& op) { return set_bytes(recipe_for(op)); }

std::unique_ptr<KernelCase> make_gpu_case(const ir::Compute& op, gpu::Context& ctx, const GpuCaseOptions& options) {
#ifndef LACUNA_HAVE_CUDA
  throw Error("no GPU kernel for " + describe_op(op) + ": this lacuna was built without CUDA");
#endif
  return std::make_unique<GpuCase>(recipe_for(op), ctx, options);
}

std::unique_ptr<GpuEnqueueCase> make_gpu_enqueue_case(const ir::Compute& op, gpu::Context& ctx,
                                                      const GpuCaseOptions& options) {
#ifndef LACUNA_HAVE_CUDA
  throw Error("no GPU kernel for " + describe_op(op) + ": this lacuna was built without CUDA");
#endif
  return std::make_unique<GpuCase>(recipe_for(op), ctx, options);
}

}  // namespace lacuna::kernels
