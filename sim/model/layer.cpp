#include "sim/model/layer.h"

#include <optional>

namespace lacuna::model {
namespace {

using ir::Phase;

double d(int64_t v) { return static_cast<double>(v); }

ir::OpClass norm_class(const LayerShape& s) { return s.norm == scenario::RMSNORM ? ir::RMSNORM : ir::LAYERNORM; }

// Fused norm: forward reads x, writes y; backward reads x and dy, writes dx
// (the γ/β gradients come out of the same kernel).
Kernel norm(const LayerShape& s, ir::KernelRole role, Phase phase, bool backward) {
  return memory_bound(norm_class(s), role, phase, {s.sp_tokens(), s.hidden}, d(s.sp_tokens() * s.hidden),
                      backward ? 3 : 2);
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
Kernel residual(const LayerShape& s, ir::KernelRole role, Phase phase, int operands, int branches) {
  const int64_t elements = s.sp_tokens() * s.hidden;
  Kernel k = memory_bound(ir::RESIDUAL_ADD, role, phase, {elements}, d(elements), operands + 1);
  if (s.hidden_dropout > 0) {
    const bool backward = phase == ir::BACKWARD_INPUT;
    const double per_branch = backward ? kBf16 + 1 + kBf16 : 1;
    k.bytes += d(elements) * branches * per_branch;
  }
  return k;
}

Kernel activation(const LayerShape& s, Phase phase, bool backward) {
  const double elements = d(s.tokens() * s.ffn_per_rank());
  if (s.activation == scenario::SWIGLU) {
    // forward reads gate and up, writes the product; backward reads gate, up
    // and dy, writes dgate and dup.
    return memory_bound(ir::SWIGLU, ir::ROLE_ACT, phase, {s.tokens(), s.ffn_per_rank()}, elements,
                        backward ? 5 : 3);
  }
  // GELU forward reads x, writes y; backward reads x and dy, writes dx.
  return memory_bound(ir::GELU, ir::ROLE_ACT, phase, {s.tokens() * s.ffn_per_rank()}, elements, backward ? 3 : 2);
}

// Y[tokens, out] = X[tokens, in]·W[in, out] and its two gradients.
Kernel linear_fwd(const LayerShape& s, ir::KernelRole role, Phase phase, int64_t in, int64_t out) {
  return gemm(role, phase, s.tokens(), out, in);
}
Kernel linear_dgrad(const LayerShape& s, ir::KernelRole role, int64_t in, int64_t out) {
  return gemm(role, ir::BACKWARD_INPUT, s.tokens(), in, out);  // dX = dY·Wᵀ
}
Kernel linear_wgrad(const LayerShape& s, ir::KernelRole role, int64_t in, int64_t out) {
  return gemm(role, ir::BACKWARD_WEIGHT, in, out, s.tokens());  // dW = Xᵀ·dY
}

Kernel attention_fwd(const LayerShape& s, Phase phase) {
  // With CP each rank's queries (s/cp) meet the keys of the whole sequence;
  // with causal masking and Megatron's load-balanced chunk order that is 1/cp
  // of the causal work per rank.
  return attention_forward(phase, s.micro_batch, s.heads_per_rank(), s.kv_heads_per_rank(), s.seq_per_rank(),
                           s.seq_length, s.head_dim(), s.causal);
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
  // kernel, not read).
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
  // Read P and dP, write dS.
  st.emplace_back(memory_bound(ir::SOFTMAX, ir::ROLE_ATTN_SOFTMAX, kB, {u.batch * u.sq, u.skv}, u.scores(), 3));
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
                                     s.seq_length, s.head_dim(), s.causal));
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
            ir::KernelRole consumer = ir::ROLE_UNSPECIFIED) {
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
  c.consumer = forward ? ir::ROLE_ATTN_PROJ : ir::ROLE_QKV;
  steps.emplace_back(c);
}

}  // namespace

std::vector<Step> layer_forward(const LayerShape& s, Phase phase) {
  std::vector<Step> st;
  const int64_t h = s.hidden;
  st.emplace_back(norm(s, ir::ROLE_NORM_ATTN, phase, false));
  add_tp(st, s, true, phase);
  st.emplace_back(linear_fwd(s, ir::ROLE_QKV, phase, h, s.qkv_width()));
  add_cp(st, s, phase);
  attention_core_fwd(st, s, phase);
  st.emplace_back(linear_fwd(s, ir::ROLE_ATTN_PROJ, phase, s.q_width(), h));
  if (s.parallel_attention_mlp) {
    // y = x + Attn(LN(x)) + MLP(LN(x)): FC1 reads the same gathered norm
    // output; FC2 accumulates onto the projection, one reduction for both.
    st.emplace_back(linear_fwd(s, ir::ROLE_FC1, phase, h, s.fc1_width()));
    st.emplace_back(activation(s, phase, false));
    st.emplace_back(linear_fwd(s, ir::ROLE_FC2, phase, s.ffn_per_rank(), h));
    add_tp(st, s, false, phase);
    st.emplace_back(residual(s, ir::ROLE_RESIDUAL_MLP, phase, 3, 2));
    return st;
  }
  add_tp(st, s, false, phase);
  st.emplace_back(residual(s, ir::ROLE_RESIDUAL_ATTN, phase, 2, 1));
  st.emplace_back(norm(s, ir::ROLE_NORM_MLP, phase, false));
  add_tp(st, s, true, phase);
  st.emplace_back(linear_fwd(s, ir::ROLE_FC1, phase, h, s.fc1_width()));
  st.emplace_back(activation(s, phase, false));
  st.emplace_back(linear_fwd(s, ir::ROLE_FC2, phase, s.ffn_per_rank(), h));
  add_tp(st, s, false, phase);
  st.emplace_back(residual(s, ir::ROLE_RESIDUAL_MLP, phase, 2, 1));
  return st;
}

std::vector<Step> layer_backward(const LayerShape& s, scenario::Recompute recompute) {
  constexpr Phase kB = ir::BACKWARD_INPUT;
  std::vector<Step> st;
  if (recompute == scenario::RECOMPUTE_FULL) st = layer_forward(s, ir::RECOMPUTE);
  const int64_t h = s.hidden;
  auto attention_block = [&] {
    st.emplace_back(linear_dgrad(s, ir::ROLE_ATTN_PROJ, s.q_width(), h));
    st.emplace_back(linear_wgrad(s, ir::ROLE_ATTN_PROJ, s.q_width(), h));
    add_cp(st, s, kB);
    if (recompute == scenario::RECOMPUTE_SELECTIVE) attention_core_fwd(st, s, ir::RECOMPUTE);
    attention_core_bwd(st, s);
    st.emplace_back(linear_dgrad(s, ir::ROLE_QKV, h, s.qkv_width()));
  };
  auto mlp_block = [&] {
    st.emplace_back(linear_dgrad(s, ir::ROLE_FC2, s.ffn_per_rank(), h));
    st.emplace_back(linear_wgrad(s, ir::ROLE_FC2, s.ffn_per_rank(), h));
    st.emplace_back(activation(s, kB, true));
    st.emplace_back(linear_dgrad(s, ir::ROLE_FC1, h, s.fc1_width()));
  };
  if (s.parallel_attention_mlp) {
    add_tp(st, s, false, kB);
    mlp_block();
    st.emplace_back(linear_wgrad(s, ir::ROLE_FC1, h, s.fc1_width()));
    attention_block();
    add_tp(st, s, true, kB);  // one reduction of dX(FC1) + dX(QKV)
    st.emplace_back(linear_wgrad(s, ir::ROLE_QKV, h, s.qkv_width()));
    st.emplace_back(norm(s, ir::ROLE_NORM_ATTN, kB, true));
    st.emplace_back(residual(s, ir::ROLE_RESIDUAL_MLP, kB, 2, 2));  // both branches' dropout
    return st;
  }
  add_tp(st, s, false, kB);
  mlp_block();
  add_tp(st, s, true, kB);
  st.emplace_back(linear_wgrad(s, ir::ROLE_FC1, h, s.fc1_width()));
  st.emplace_back(norm(s, ir::ROLE_NORM_MLP, kB, true));
  st.emplace_back(residual(s, ir::ROLE_RESIDUAL_MLP, kB, 2, 1));
  add_tp(st, s, false, kB);
  attention_block();
  add_tp(st, s, true, kB);
  st.emplace_back(linear_wgrad(s, ir::ROLE_QKV, h, s.qkv_width()));
  st.emplace_back(norm(s, ir::ROLE_NORM_ATTN, kB, true));
  st.emplace_back(residual(s, ir::ROLE_RESIDUAL_ATTN, kB, 2, 1));
  return st;
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
  add_tp(st, s, false, ir::BACKWARD_INPUT, ir::ROLE_EMBEDDING);
  // Scatter-add: read dY (bf16), read-modify-write fp32 gradient rows.
  st.emplace_back(memory_bound(ir::EMBEDDING, ir::ROLE_EMBEDDING, ir::BACKWARD_WEIGHT,
                               {s.tokens(), s.hidden, s.vocab_per_rank()}, d(s.tokens() * s.hidden),
                               kBf16 + 2 * kFp32, 1));
  return st;
}

std::vector<Step> head_forward(const LayerShape& s) {
  std::vector<Step> st;
  st.emplace_back(norm(s, ir::ROLE_FINAL_NORM, ir::FORWARD, false));
  add_tp(st, s, true, ir::FORWARD);
  st.emplace_back(linear_fwd(s, ir::ROLE_LOGITS, ir::FORWARD, s.hidden, s.vocab_per_rank()));
  // Read bf16 logits, write the fp32 softmax kept for backward.
  const double elements = d(s.tokens() * s.vocab_per_rank());
  st.emplace_back(memory_bound(ir::CROSS_ENTROPY, ir::ROLE_LOSS, ir::FORWARD, {s.tokens(), s.vocab_per_rank()}, elements,
                               kBf16 + kFp32, 1));
  return st;
}

std::vector<Step> head_backward(const LayerShape& s) {
  std::vector<Step> st;
  const double elements = d(s.tokens() * s.vocab_per_rank());
  // Read the fp32 softmax, write the bf16 logits gradient.
  st.emplace_back(memory_bound(ir::CROSS_ENTROPY, ir::ROLE_LOSS, ir::BACKWARD_INPUT, {s.tokens(), s.vocab_per_rank()},
                               elements, kFp32 + kBf16, 1));
  st.emplace_back(linear_dgrad(s, ir::ROLE_LOGITS, s.hidden, s.vocab_per_rank()));
  add_tp(st, s, true, ir::BACKWARD_INPUT);
  st.emplace_back(linear_wgrad(s, ir::ROLE_LOGITS, s.hidden, s.vocab_per_rank()));
  st.emplace_back(norm(s, ir::ROLE_FINAL_NORM, ir::BACKWARD_INPUT, true));
  return st;
}

int64_t head_activation_bytes(const LayerShape& s) {
  return s.sp_tokens() * s.hidden * kBf16 + s.tokens() * s.hidden * kBf16 + s.tokens() * s.vocab_per_rank() * kFp32;
}

}  // namespace lacuna::model
