#include "sim/model/layer.h"

#include <optional>

#include "sim/model/fp8.h"
#include "sim/model/mlp.h"
#include "sim/model/model_internal.h"
#include "sim/model/moe.h"

namespace lacuna::model {
namespace {

using ir::Phase;

using internal::d;

ir::OpClass norm_class(const LayerShape& s) { return s.norm == scenario::RMSNORM ? ir::RMSNORM : ir::LAYERNORM; }

void norm(std::vector<Step>& st, const LayerShape& s, ir::KernelRole role, Phase phase, bool backward) {
  for (Kernel& k : norm_kernels(s, role, phase, backward, s.sp_tokens())) st.emplace_back(std::move(k));
}

// Bias-dropout-add forward (read branch and residual, write sum); its backward
// is the accumulation of the two gradient paths where they meet at the norm
// input (read both, write one). `operands` = tensors added, 2 or 3.
// Hidden dropout (p > 0) on the `branches` dropped branches (attention and /
// or MLP output) adds per branch and element: forward the 1-byte mask written
// (the fused kernel already streams the branch and the residual); backward
// the dropout's own pass, read dY and the mask, write the branch gradient
// (2 + 1 + 2 bytes), which autograd runs before the branch's backward and so
// cannot share this kernel's reads.
Kernel fused_residual(const LayerShape& s, ir::KernelRole role, Phase phase, int operands, int branches) {
  const int64_t elements = s.sp_tokens() * s.hidden;
  Kernel k = memory_bound(ir::RESIDUAL_ADD, role, phase, {elements}, d(elements), operands + 1);
  if (s.hidden_dropout > 0) {
    const bool backward = phase == ir::BACKWARD_INPUT;
    const double per_branch = backward ? kBf16 + 1 + kBf16 : 1;
    k.bytes += d(elements) * branches * per_branch;
  }
  return k;
}

// Bias-dropout-add of `branches` branches onto the residual. Fused
// (--bias-dropout-fusion, Megatron's default): one kernel as above. Unfused
// (eager PyTorch): per branch a bias add (read, write; with linear biases)
// and a dropout (read, write and the 1-byte mask; p > 0), then the add of
// `operands` tensors; backward: per branch the dropout's own pass (read dY
// and the mask, write) and the accumulation (docs/kernels.md#fused-kernels).
void residual(std::vector<Step>& st, const LayerShape& s, ir::KernelRole role, Phase phase, int operands,
              int branches) {
  if (s.bias_dropout_fusion) {
    st.emplace_back(fused_residual(s, role, phase, operands, branches));
    return;
  }
  const int64_t elements = s.sp_tokens() * s.hidden;
  const bool backward = phase == ir::BACKWARD_INPUT;
  for (int b = 0; b < branches; ++b) {
    if (s.linear_bias && !backward)
      st.emplace_back(memory_bound(ir::ELEMENTWISE, ir::ROLE_BIAS, phase, {elements}, d(elements), 2));
    if (s.hidden_dropout > 0) {
      Kernel k = memory_bound(ir::ELEMENTWISE, ir::ROLE_DROPOUT, phase, {elements}, d(elements), 2);
      k.bytes += d(elements);  // the mask: written forward, read backward
      st.emplace_back(k);
    }
  }
  st.emplace_back(memory_bound(ir::RESIDUAL_ADD, role, phase, {elements}, d(elements), operands + 1));
}

Kernel activation_kernel(const LayerShape& s, Phase phase, bool backward, ir::KernelRole role = ir::ROLE_ACT) {
  const double elements = d(s.tokens() * s.ffn_per_rank());
  if (s.activation == scenario::SWIGLU) {
    // forward reads gate and up, writes the product; backward reads gate, up
    // and dy, writes dgate and dup.
    return memory_bound(ir::SWIGLU, role, phase, {s.tokens(), s.ffn_per_rank()}, elements,
                        backward ? 5 : 3);
  }
  // GELU forward reads x, writes y; backward reads x and dy, writes dx.
  return memory_bound(ir::GELU, role, phase, {s.tokens() * s.ffn_per_rank()}, elements, backward ? 3 : 2);
}

// FC1's bias and the activation: one kernel with --bias-gelu-fusion (and
// Megatron's bias-SwiGLU fusion), the default; unfused, a bias add over FC1's
// output (read, write) first. Backward is the same either way: the
// activation's backward recomputes x + b, autograd's bias reduction follows.
void activation(std::vector<Step>& st, const LayerShape& s, Phase phase, bool backward,
                ir::KernelRole role = ir::ROLE_ACT) {
  if (!backward && s.linear_bias && !s.bias_gelu_fusion) {
    const int64_t elements = s.tokens() * s.fc1_width();
    st.emplace_back(memory_bound(ir::ELEMENTWISE, ir::ROLE_BIAS, phase, {elements}, d(elements), 2));
  }
  st.emplace_back(activation_kernel(s, phase, backward, role));
}

// Y[tokens, out] = X[tokens, in]·W[in, out] and its two gradients.
Kernel linear_fwd(const LayerShape& s, ir::KernelRole role, Phase phase, int64_t in, int64_t out) {
  return gemm(role, phase, s.tokens(), out, in);
}
Kernel linear_dgrad(const LayerShape& s, ir::KernelRole role, int64_t in, int64_t out) {
  return gemm(role, ir::BACKWARD_INPUT, s.tokens(), in, out);  // dX = dY·Wᵀ
}

Kernel attention_fwd(const LayerShape& s, Phase phase) {
  // With CP each rank's queries (s/cp) meet the keys of the whole sequence;
  // with causal masking and Megatron's load-balanced chunk order that is 1/cp
  // of the causal work per rank.
  return attention_forward(phase, s.micro_batch, s.heads_per_rank(), s.kv_heads_per_rank(), s.seq_per_rank(),
                           s.seq_length, s.head_dim(), s.causal, s.attention_window);
}

// Megatron-LM's unfused CoreAttention on this rank: batch·heads = b·a_r score
// matrices of s_c × s (CP: the local queries against the whole sequence, as
// for the fused kernel), all computed (the mask does not skip work) and
// materialised in HBM. GQA's K and V are read per query head (Megatron
// expands them). docs/kernels.md.
struct Unfused {
  int64_t batch, sq, skv, d;
  double scores() const { return d_(batch) * d_(sq) * d_(skv); }
  static double d_(int64_t v) { return static_cast<double>(v); }
};

Unfused unfused(const LayerShape& s) {
  return {s.micro_batch * s.heads_per_rank(), s.seq_per_rank(), s.seq_length, s.head_dim()};
}

// S = QKᵀ, P = softmax(mask(S/√d)), P' = dropout(P), O = P'·V.
void attention_unfused_fwd(std::vector<Step>& st, const LayerShape& s, Phase phase) {
  const Unfused u = unfused(s);
  st.emplace_back(batched_gemm(ir::ROLE_ATTN_SCORES, phase, u.batch, u.sq, u.skv, u.d));
  // Scale-mask-softmax: read S, write P (the causal mask is generated in the
  // kernel, not read). Without --masked-softmax-fusion the mask is applied
  // first by a masked_fill (read S and the 1-byte mask, write; the 1/√d scale
  // rides the QKᵀ GEMM) and torch's softmax follows.
  if (!s.masked_softmax_fusion)
    st.emplace_back(stream_pass(ir::ROLE_ATTN_SCALE_MASK, phase, u.batch * u.sq * u.skv, kBf16 + 1 + kBf16));
  st.emplace_back(memory_bound(ir::SOFTMAX, ir::ROLE_ATTN_SOFTMAX, phase, {u.batch * u.sq, u.skv}, u.scores(), 2));
  if (s.attention_dropout > 0) {
    // Read P, write P' and the 1-byte mask.
    st.emplace_back(memory_bound(ir::ELEMENTWISE, ir::ROLE_ATTN_DROPOUT, phase, {u.batch * u.sq * u.skv}, u.scores(),
                                 kBf16 + kBf16 + 1, 1));
  }
  st.emplace_back(batched_gemm(ir::ROLE_ATTN_CONTEXT, phase, u.batch, u.sq, u.d, u.skv));
}

// Autograd order: dP' = dO·Vᵀ, dV = P'ᵀ·dO, dropout backward, softmax
// backward, dQ = dS·K, dK = dSᵀ·Q. All B: attention has no weights.
void attention_unfused_bwd(std::vector<Step>& st, const LayerShape& s) {
  constexpr Phase kB = ir::BACKWARD_INPUT;
  const Unfused u = unfused(s);
  st.emplace_back(batched_gemm(ir::ROLE_ATTN_CONTEXT, kB, u.batch, u.sq, u.skv, u.d));  // dP'
  st.emplace_back(batched_gemm(ir::ROLE_ATTN_CONTEXT, kB, u.batch, u.skv, u.d, u.sq));  // dV
  if (s.attention_dropout > 0) {
    // Read dP' and the mask, write dP.
    st.emplace_back(memory_bound(ir::ELEMENTWISE, ir::ROLE_ATTN_DROPOUT, kB, {u.batch * u.sq * u.skv}, u.scores(),
                                 kBf16 + 1 + kBf16, 1));
  }
  // Read P and dP, write dS; unfused, the masked_fill's backward (read,
  // write) follows.
  st.emplace_back(memory_bound(ir::SOFTMAX, ir::ROLE_ATTN_SOFTMAX, kB, {u.batch * u.sq, u.skv}, u.scores(), 3));
  if (!s.masked_softmax_fusion)
    st.emplace_back(memory_bound(ir::ELEMENTWISE, ir::ROLE_ATTN_SCALE_MASK, kB, {u.batch * u.sq * u.skv}, u.scores(), 2));
  st.emplace_back(batched_gemm(ir::ROLE_ATTN_SCORES, kB, u.batch, u.sq, u.d, u.skv));  // dQ
  st.emplace_back(batched_gemm(ir::ROLE_ATTN_SCORES, kB, u.batch, u.skv, u.d, u.sq));  // dK
}

void attention_core_fwd(std::vector<Step>& st, const LayerShape& s, Phase phase) {
  if (s.unfused_attention)
    attention_unfused_fwd(st, s, phase);
  else
    st.emplace_back(attention_fwd(s, phase));
}

void attention_core_bwd(std::vector<Step>& st, const LayerShape& s) {
  if (s.unfused_attention) {
    attention_unfused_bwd(st, s);
    return;
  }
  st.emplace_back(attention_backward(s.micro_batch, s.heads_per_rank(), s.kv_heads_per_rank(), s.seq_per_rank(),
                                     s.seq_length, s.head_dim(), s.causal, s.attention_window));
}

// Megatron's f / g conjugate operators. `before_linear`: f (identity forward,
// reduction backward) ahead of a column-parallel GEMM; otherwise g after a
// row-parallel GEMM. With SP the all-reduce becomes all-gather / reduce-scatter.
std::optional<CommPoint> tp_comm(const LayerShape& s, bool before_linear, Phase phase) {
  if (s.tp <= 1) return std::nullopt;
  const bool forward = phase == ir::FORWARD || phase == ir::RECOMPUTE;
  CommPoint c;
  c.group = CommGroup::kTp;
  c.bytes = s.hidden_bytes();
  c.phase = phase;
  if (!s.sequence_parallel) {
    // f: nothing forward, all-reduce of dX backward; g: the reverse.
    if (forward == before_linear) return std::nullopt;
    c.kind = ir::ALL_REDUCE;
    return c;
  }
  // SP: f all-gathers forward / reduce-scatters backward; g the reverse.
  c.kind = (forward == before_linear) ? ir::ALL_GATHER : ir::REDUCE_SCATTER;
  return c;
}

void add_tp(std::vector<Step>& steps, const LayerShape& s, bool before_linear, Phase phase,
            Consumer consumer = {}) {
  if (auto c = tp_comm(s, before_linear, phase)) {
    c->consumer = consumer;
    steps.emplace_back(*c);
  }
}

// Ring attention (Megatron CP) approximated as one all-gather of the full
// sequence's K and V forward and one reduce-scatter of dK, dV backward, run
// alongside the attention kernel (docs/compiler.md).
void add_cp(std::vector<Step>& steps, const LayerShape& s, Phase phase) {
  if (s.cp <= 1) return;
  CommPoint c;
  c.group = CommGroup::kCp;
  c.bytes = 2 * s.micro_batch * s.seq_length * s.kv_width() * kBf16;
  c.phase = phase;
  const bool forward = phase == ir::FORWARD || phase == ir::RECOMPUTE;
  c.kind = forward ? ir::ALL_GATHER : ir::REDUCE_SCATTER;
  c.consumer = forward ? Consumer{ir::ROLE_ATTN_PROJ, phase} : Consumer{ir::ROLE_QKV, ir::BACKWARD_INPUT};
  steps.emplace_back(c);
}

// A GEMM over the rank's tokens split into n row pieces (TP communication
// overlap; docs/compiler.md#tp-overlap), each followed by `after_each`'s
// piece if given. `make(rows)` builds one piece.
template <class Make>
void gemm_pieces(std::vector<Step>& st, const LayerShape& s, int64_t n, Make make,
                 const std::vector<CommPoint>* after_each) {
  for (int64_t j = 0; j < n; ++j) {
    Kernel k = make(s.tokens() / n);
    if (n > 1) k.chunk = static_cast<int32_t>(j);
    st.emplace_back(std::move(k));
    if (after_each) st.emplace_back((*after_each)[static_cast<size_t>(j)]);
  }
}

// The n pieces of one TP collective under overlap: `kind` over bytes / n
// each, consumed by the GEMM piece of the same index (`per_piece`) or all by
// `consumer`.
std::vector<CommPoint> comm_pieces(const LayerShape& s, int64_t n, ir::CollectiveKind kind, Phase phase,
                                   ir::KernelRole role, Phase consumer_phase, bool per_piece, Consumer consumer = {}) {
  std::vector<CommPoint> out(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    CommPoint& c = out[static_cast<size_t>(j)];
    c.group = CommGroup::kTp;
    c.kind = kind;
    c.bytes = s.hidden_bytes() / n;
    c.phase = phase;
    c.consumer = per_piece ? Consumer{role, consumer_phase, static_cast<int32_t>(j)} : consumer;
  }
  return out;
}

// A column-parallel linear's forward (QKV, FC1): f's communication, then the
// GEMM. With TP overlap (SP): the all-gather in n pieces, each GEMM piece
// waiting only for its own (bulk pipeline: the first piece's gather is
// exposed, the others overlap the GEMM pieces before them).
void column_forward(std::vector<Step>& st, const LayerShape& s, ir::KernelRole role, Phase phase, int64_t in,
                    int64_t out) {
  auto make = [&](int64_t rows) { return gemm(role, phase, rows, out, in); };
  if (const int64_t n = s.tp_overlap_ag_chunks; n > 1) {
    // Every gather is issued first (the TP stream runs them in order), then
    // the GEMM pieces, each after its gather.
    for (CommPoint& c : comm_pieces(s, n, ir::ALL_GATHER, phase, role, phase, true)) st.emplace_back(c);
    gemm_pieces(st, s, n, make, nullptr);
    return;
  }
  add_tp(st, s, true, phase);
  st.emplace_back(make(s.tokens()));
}

// A row-parallel linear's forward (projection, FC2): the GEMM, then g's
// communication, consumed by `consumer` (the residual add). With TP overlap:
// each GEMM piece's reduce-scatter overlaps the next piece.
void row_forward(std::vector<Step>& st, const LayerShape& s, ir::KernelRole role, Phase phase, int64_t in, int64_t out,
                 Consumer consumer) {
  auto make = [&](int64_t rows) { return gemm(role, phase, rows, out, in); };
  if (const int64_t n = s.tp_overlap_rs_chunks; n > 1) {
    const auto rs = comm_pieces(s, n, ir::REDUCE_SCATTER, phase, role, phase, false, consumer);
    gemm_pieces(st, s, n, make, &rs);
    return;
  }
  st.emplace_back(make(s.tokens()));
  add_tp(st, s, false, phase, consumer);
}

// Weight gradient of a linear layer, and without gradient-accumulation
// fusion the add of its 16-bit result into the main_grad (Megatron's DDP
// hook main_grad.add_(grad): read 2 + g, write g bytes per weight, g = 4 for
// fp32 main gradients, 2 otherwise).
void wgrad(std::vector<Step>& st, const LayerShape& s, ir::KernelRole role, int64_t in, int64_t out) {
  linear_wgrad_rows(st, s, role, in, out, s.tokens());
}

}  // namespace

void linear_wgrad_rows(std::vector<Step>& st, const LayerShape& s, ir::KernelRole role, int64_t in, int64_t out,
                       int64_t rows) {
  st.emplace_back(gemm(role, ir::BACKWARD_WEIGHT, in, out, rows));  // dW = Xᵀ·dY
  if (!s.gradient_accumulation_fusion) {
    const int64_t weights = in * out;
    const int64_t g = s.grad_fp32 ? kFp32 : kBf16;
    st.emplace_back(stream_pass(ir::ROLE_GRAD_ACCUM, ir::BACKWARD_WEIGHT, weights, kBf16 + 2 * g));
  }
}

namespace {

// A row-parallel linear's backward (FC2, projection): g's backward
// communication (with SP the gradient's all-gather), the input gradient, the
// weight gradient. With TP overlap the gather is pipelined with the dgrad
// pieces.
void row_backward(std::vector<Step>& st, const LayerShape& s, ir::KernelRole role, int64_t in, int64_t out) {
  constexpr Phase kB = ir::BACKWARD_INPUT;
  auto make = [&](int64_t rows) { return gemm(role, kB, rows, in, out); };  // dX = dY·Wᵀ
  if (const int64_t n = s.tp_overlap_ag_chunks; n > 1) {
    for (CommPoint& c : comm_pieces(s, n, ir::ALL_GATHER, kB, role, kB, true)) st.emplace_back(c);
    gemm_pieces(st, s, n, make, nullptr);
  } else {
    add_tp(st, s, false, kB);
    st.emplace_back(make(s.tokens()));
  }
  wgrad(st, s, role, in, out);
}

// A column-parallel linear's backward (QKV, FC1) and f's backward
// communication: the input gradient's all-reduce (reduce-scatter with SP),
// consumed by `next` (the norm's backward). With SP the layer input is
// all-gathered again for the weight gradient (Megatron keeps only its
// sequence shard), overlapped with the dgrad GEMM. The reduction overlaps the
// wgrad GEMM with the async TP all-reduce (tp_async_grad_reduce), else it
// follows it. Transformer Engine's TP overlap runs these two as "bulk"
// overlaps, which is what the async path already models (no pieces).
// `reduce`: false when a later column linear's reduction covers this one too
// (parallel attention/MLP).
void column_backward(std::vector<Step>& st, const LayerShape& s, ir::KernelRole role, int64_t in, int64_t out,
                     bool reduce, Consumer next) {
  constexpr Phase kB = ir::BACKWARD_INPUT;
  auto make = [&](int64_t rows) { return gemm(role, kB, rows, in, out); };  // dX = dY·Wᵀ
  if (s.sequence_parallel && s.tp > 1) {
    CommPoint gather;
    gather.group = CommGroup::kTp;
    gather.kind = ir::ALL_GATHER;
    gather.bytes = s.hidden_bytes();
    gather.phase = kB;
    gather.consumer = Consumer{role, ir::BACKWARD_WEIGHT};
    st.emplace_back(gather);
  }
  st.emplace_back(make(s.tokens()));
  if (reduce && s.tp_async_grad_reduce) add_tp(st, s, true, kB, next);
  wgrad(st, s, role, in, out);
  if (reduce && !s.tp_async_grad_reduce) add_tp(st, s, true, kB, next);
}

}  // namespace

void mlp_forward(std::vector<Step>& st, const LayerShape& s, Phase phase, const MlpRoles& roles) {
  column_forward(st, s, roles.fc1, phase, s.hidden, s.fc1_width());
  activation(st, s, phase, false, roles.act);
  row_forward(st, s, roles.fc2, phase, s.ffn_per_rank(), s.hidden, Consumer{});
}

void mlp_backward(std::vector<Step>& st, const LayerShape& s, const MlpRoles& roles, bool reduce, Consumer next) {
  row_backward(st, s, roles.fc2, s.ffn_per_rank(), s.hidden);
  activation(st, s, ir::BACKWARD_INPUT, true, roles.act);
  column_backward(st, s, roles.fc1, s.hidden, s.fc1_width(), reduce, next);
}

std::vector<Kernel> norm_kernels(const LayerShape& s, ir::KernelRole role, Phase phase, bool backward,
                                 int64_t tokens) {
  const double e = d(tokens * s.hidden);
  const std::vector<int64_t> shape = {tokens, s.hidden};
  const ir::OpClass cls = norm_class(s);
  // Fused (apex / Transformer Engine): forward reads x, writes y; backward
  // reads x and dy, writes dx, the γ/β gradients out of the same kernel.
  if (s.fused_layer_norm) return {memory_bound(cls, role, phase, shape, e, backward ? 3 : 2)};
  if (s.norm == scenario::LAYERNORM) {
    // torch.nn.LayerNorm: one kernel forward; backward writes dx, then a
    // second kernel reduces γ and β gradients over the tokens, reading x and
    // dy again.
    if (!backward) return {memory_bound(cls, role, phase, shape, e, 2)};
    return {memory_bound(cls, role, phase, shape, e, 3),
            memory_bound(cls, ir::ROLE_NORM_WEIGHT_GRAD, phase, shape, e, 2)};
  }
  // RMSNorm written in eager PyTorch, x·rsqrt(mean(x²) + ε)·w: forward a
  // mean-of-squares reduction (read x), the normalisation and the scale
  // (read, write each); backward dw = Σ dy·x̂ (read dy, x), dy·w (read, write)
  // and dx (read x and d(x̂), write, with the row reduction inside).
  if (!backward)
    return {memory_bound(cls, role, phase, shape, e, 1), memory_bound(ir::ELEMENTWISE, role, phase, {tokens * s.hidden}, e, 2),
            memory_bound(ir::ELEMENTWISE, role, phase, {tokens * s.hidden}, e, 2)};
  return {memory_bound(cls, ir::ROLE_NORM_WEIGHT_GRAD, phase, shape, e, 2),
          memory_bound(ir::ELEMENTWISE, role, phase, {tokens * s.hidden}, e, 2), memory_bound(cls, role, phase, shape, e, 3)};
}

namespace {

// The layer in BF16; layer_forward / layer_backward apply the FP8 pass
// (fp8.h) once to the whole list.
std::vector<Step> layer_forward_bf16(const LayerShape& s, Phase phase) {
  std::vector<Step> st;
  const int64_t h = s.hidden;
  norm(st, s, ir::ROLE_NORM_ATTN, phase, false);
  column_forward(st, s, ir::ROLE_QKV, phase, h, s.qkv_width());
  add_cp(st, s, phase);
  attention_core_fwd(st, s, phase);
  if (s.parallel_attention_mlp) {
    // y = x + Attn(LN(x)) + MLP(LN(x)): FC1 reads the same gathered norm
    // output; FC2 accumulates onto the projection, one reduction for both.
    st.emplace_back(linear_fwd(s, ir::ROLE_ATTN_PROJ, phase, s.q_width(), h));
    st.emplace_back(linear_fwd(s, ir::ROLE_FC1, phase, h, s.fc1_width()));
    activation(st, s, phase, false);
    row_forward(st, s, ir::ROLE_FC2, phase, s.ffn_per_rank(), h, Consumer{});
    residual(st, s, ir::ROLE_RESIDUAL_MLP, phase, 3, 2);
    return st;
  }
  row_forward(st, s, ir::ROLE_ATTN_PROJ, phase, s.q_width(), h, Consumer{});
  residual(st, s, ir::ROLE_RESIDUAL_ATTN, phase, 2, 1);
  norm(st, s, ir::ROLE_NORM_MLP, phase, false);
  if (s.moe_layer)
    moe_mlp_forward(st, s, phase);
  else
    mlp_forward(st, s, phase, MlpRoles{});
  residual(st, s, ir::ROLE_RESIDUAL_MLP, phase, 2, 1);
  return st;
}

std::vector<Step> layer_backward_bf16(const LayerShape& s, scenario::Recompute recompute) {
  constexpr Phase kB = ir::BACKWARD_INPUT;
  std::vector<Step> st;
  if (recompute == scenario::RECOMPUTE_FULL) st = layer_forward_bf16(s, ir::RECOMPUTE);
  const int64_t h = s.hidden;
  auto attention_core = [&] {
    add_cp(st, s, kB);
    if (recompute == scenario::RECOMPUTE_SELECTIVE) attention_core_fwd(st, s, ir::RECOMPUTE);
    attention_core_bwd(st, s);
  };
  if (s.parallel_attention_mlp) {
    // One reduction of dX(FC1) + dX(QKV) after QKV's dgrad, before the norm.
    const Consumer norm_b{};
    row_backward(st, s, ir::ROLE_FC2, s.ffn_per_rank(), h);
    activation(st, s, kB, true);
    column_backward(st, s, ir::ROLE_FC1, h, s.fc1_width(), false, norm_b);
    // The projection's gradient is FC2's gathered one (one g for both).
    st.emplace_back(linear_dgrad(s, ir::ROLE_ATTN_PROJ, s.q_width(), h));
    wgrad(st, s, ir::ROLE_ATTN_PROJ, s.q_width(), h);
    attention_core();
    column_backward(st, s, ir::ROLE_QKV, h, s.qkv_width(), true, norm_b);
    norm(st, s, ir::ROLE_NORM_ATTN, kB, true);
    residual(st, s, ir::ROLE_RESIDUAL_MLP, kB, 2, 2);  // both branches' dropout
    return st;
  }
  if (s.moe_layer)
    moe_mlp_backward(st, s);
  else
    mlp_backward(st, s, MlpRoles{}, true, Consumer{});
  norm(st, s, ir::ROLE_NORM_MLP, kB, true);
  residual(st, s, ir::ROLE_RESIDUAL_MLP, kB, 2, 1);
  row_backward(st, s, ir::ROLE_ATTN_PROJ, s.q_width(), h);
  attention_core();
  column_backward(st, s, ir::ROLE_QKV, h, s.qkv_width(), true, Consumer{});
  norm(st, s, ir::ROLE_NORM_ATTN, kB, true);
  residual(st, s, ir::ROLE_RESIDUAL_ATTN, kB, 2, 1);
  return st;
}

}  // namespace

std::vector<Step> layer_forward(const LayerShape& s, Phase phase) { return apply_fp8(s, layer_forward_bf16(s, phase)); }

std::vector<Step> layer_backward(const LayerShape& s, scenario::Recompute recompute) {
  return apply_fp8(s, layer_backward_bf16(s, recompute));
}

std::vector<Step> embedding_forward(const LayerShape& s) {
  std::vector<Step> st;
  // Gather one row per token (read + write), plus the position row to add.
  const double accesses = s.learned_positions ? 3 : 2;
  st.emplace_back(memory_bound(ir::EMBEDDING, ir::ROLE_EMBEDDING, ir::FORWARD, {s.tokens(), s.hidden, s.vocab_per_rank()},
                               d(s.tokens() * s.hidden), accesses));
  // Vocab-parallel: each rank holds rows of its vocabulary slice only; the
  // partial outputs are summed (g operator).
  add_tp(st, s, false, ir::FORWARD);
  return st;
}

std::vector<Step> embedding_backward(const LayerShape& s) {
  std::vector<Step> st;
  add_tp(st, s, false, ir::BACKWARD_INPUT, Consumer{ir::ROLE_EMBEDDING});
  // Scatter-add: read dY (bf16), read-modify-write fp32 gradient rows.
  st.emplace_back(memory_bound(ir::EMBEDDING, ir::ROLE_EMBEDDING, ir::BACKWARD_WEIGHT,
                               {s.tokens(), s.hidden, s.vocab_per_rank()}, d(s.tokens() * s.hidden),
                               kBf16 + 2 * kFp32, 1));
  return st;
}

std::vector<Step> head_forward(const LayerShape& s) {
  std::vector<Step> st;
  norm(st, s, ir::ROLE_FINAL_NORM, ir::FORWARD, false);
  add_tp(st, s, true, ir::FORWARD);
  st.emplace_back(linear_fwd(s, ir::ROLE_LOGITS, ir::FORWARD, s.hidden, s.vocab_per_rank()));
  // Vocab-parallel cross entropy (Megatron's _VocabParallelCrossEntropy):
  // the row max over this rank's vocabulary slice (read the logits), its
  // all-reduce (MAX) over TP; the softmax (read the logits, write the fp32
  // softmax kept for backward) with the target logit and Σexp all-reduced
  // (SUM) over TP; then the loss per token. Each all-reduce moves one fp32
  // per token.
  const double elements = d(s.tokens() * s.vocab_per_rank());
  const std::vector<int64_t> shape = {s.tokens(), s.vocab_per_rank()};
  st.emplace_back(stream_pass(ir::ROLE_LOSS, ir::FORWARD, s.tokens() * s.vocab_per_rank(), kBf16));
  auto ce_all_reduce = [&] {
    if (s.tp <= 1) return;
    CommPoint c;
    c.group = CommGroup::kTp;
    c.kind = ir::ALL_REDUCE;
    c.bytes = s.tokens() * kFp32;
    c.phase = ir::FORWARD;
    c.consumer = Consumer{ir::ROLE_LOSS, ir::FORWARD};
    st.emplace_back(c);
  };
  ce_all_reduce();
  st.emplace_back(memory_bound(ir::CROSS_ENTROPY, ir::ROLE_LOSS, ir::FORWARD, shape, elements, kBf16 + kFp32, 1));
  ce_all_reduce();
  ce_all_reduce();
  // loss = log Σexp − target logit: a few fp32 per token.
  st.emplace_back(stream_pass(ir::ROLE_LOSS, ir::FORWARD, s.tokens(), 3 * kFp32));
  return st;
}

std::vector<Step> head_backward(const LayerShape& s) {
  std::vector<Step> st;
  const double elements = d(s.tokens() * s.vocab_per_rank());
  // Read the fp32 softmax, write the bf16 logits gradient.
  st.emplace_back(memory_bound(ir::CROSS_ENTROPY, ir::ROLE_LOSS, ir::BACKWARD_INPUT, {s.tokens(), s.vocab_per_rank()},
                               elements, kFp32 + kBf16, 1));
  // The logits layer is column-parallel: with SP its input is gathered again
  // for the weight gradient; its input gradient is reduced (scattered) over
  // TP before the final norm's backward. It is a plain Megatron linear, never
  // split for TP overlap (Transformer Engine's userbuffers serve the layers).
  LayerShape plain = s;
  plain.tp_overlap_ag_chunks = plain.tp_overlap_rs_chunks = 1;
  column_backward(st, plain, ir::ROLE_LOGITS, s.hidden, s.vocab_per_rank(), true, Consumer{});
  norm(st, s, ir::ROLE_FINAL_NORM, ir::BACKWARD_INPUT, true);
  return st;
}

Bytes head_activation_bytes(const LayerShape& s) {
  return Bytes(s.sp_tokens() * s.hidden * kBf16 + s.tokens() * s.hidden * kBf16 + s.tokens() * s.vocab_per_rank() * kFp32);
}

}  // namespace lacuna::model
