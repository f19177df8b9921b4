// CPU reference implementations of the attention core (issue 5): the naive
// (materialised scores) forward and backward, and the FlashAttention-2
// algorithm on the CPU (tiled forward with online softmax, tiled backward that
// recomputes P from the log-sum-exp). The tiled functions are the blueprint of
// the CUDA kernel: same loops, same per-row state, same masking and block
// skipping; only the parallelisation (one thread block per (batch, head,
// query block) in the forward, per (batch, head, key block) in the backward)
// is left to the GPU.
//
// ---------------------------------------------------------------- layout
// Row-major, the layout QKV projections of a TP shard produce:
//   Q, O, dQ, dO  [batch, seq_q,  heads,    head_dim]
//   K, V, dK, dV  [batch, seq_kv, kv_heads, head_dim]
//   LSE           [batch, heads, seq_q]  (FA2's layout; natural log of the
//                                         sum of exp of the *scaled* scores)
// GQA: kv_heads divides heads; query head h reads kv head h / (heads / kv_heads).
// MHA is kv_heads == heads, MQA kv_heads == 1.
//
// Storage is T (float or double); every dot product, sum, max and
// accumulator is double. Scores are s_ij = scale · q_i·k_j with scale
// defaulting to 1/sqrt(head_dim).
//
// Causal masking is bottom-right aligned (FlashAttention ≥ 2.1): query row i
// may attend key j iff j <= i + (seq_kv - seq_q). With seq_q == seq_kv this is
// the usual j <= i; seq_q < seq_kv is a chunk of the latest queries against a
// longer key sequence (decode, or the last chunk of a context-parallel split).
// Causal with seq_q > seq_kv would leave rows with no key and is an error.
//
// ---------------------------------------------------------------- forward (FA2)
// For each (batch b, head h) and each block of Br query rows [i0, i1):
//   per row i keep three things, all in double (registers / shared memory on
//   the GPU):  m_i  the running maximum of the scores seen so far (starts -inf)
//              l_i  the running sum of exp(s_ij - m_i)       (starts 0)
//              acc_i[d] the running sum of exp(s_ij - m_i)·v_j (starts 0)
//   Key blocks [j0, j1) of Bc columns are visited left to right. Causal block
//   skipping: the loop stops at kv_end = min(seq_kv, i1 - 1 + offset + 1),
//   the last key the block's last row can see, so blocks entirely above the
//   diagonal are never loaded; only blocks straddling the diagonal
//   (j1 - 1 > i0 + offset) apply the element mask (s_ij = -inf).
//   For each visited key block:
//     1. S = scale · Q_blk · K_blkᵀ (Br × Bc), masked entries -inf;
//     2. m_new = max(m_i, max_j S_ij);
//     3. alpha = exp(m_i - m_new)  (exp(-inf) = 0 on the first block);
//     4. P_ij = exp(S_ij - m_new)   (masked: exp(-inf) = 0);
//     5. l_i = alpha·l_i + Σ_j P_ij;   acc_i = alpha·acc_i + Σ_j P_ij·v_j;
//     6. m_i = m_new.
//   Finally O_i = acc_i / l_i and LSE_i = m_i + log(l_i).
// Why the rescale is exact: the invariant after any prefix of key blocks is
//   l_i = Σ_{j seen} exp(s_ij - m_i),   acc_i = Σ_{j seen} exp(s_ij - m_i)·v_j.
// Changing the reference maximum from m to m' multiplies every term by
// exp(m - m') because exp(s - m)·exp(m - m') = exp(s - m'), so step 5 restores
// the invariant for the new maximum, and the new block's terms are added
// directly relative to m'. After the last block l_i and acc_i are the
// softmax's denominator and numerator relative to the row maximum, so
// acc_i / l_i is softmax(s_i)·V independent of the blocking (in exact
// arithmetic; in floating point the order of summation differs from the naive
// one only by rounding). All exponents are <= 0, so nothing overflows however
// large the scores are, and the quotient never sees the unnormalised values.
//
// ---------------------------------------------------------------- backward (FA2)
// Preprocessing (a separate small kernel on the GPU): D_i = Σ_c dO_ic·O_ic,
// which equals Σ_j P_ij·dP_ij (since O_i = Σ_j P_ij v_j and dP_ij = dO_i·v_j).
// For each (b, h) and each block of Bc keys [j0, j1) (outer loop; dK_blk and
// dV_blk accumulate in double, "registers"):
//   query blocks are visited from the first one that can see key j0
//   (causal: rows i >= j0 - offset; earlier blocks are skipped), and for each:
//     1. S = scale · Q_blk · K_blkᵀ, masked as in the forward;
//     2. P_ij = exp(S_ij - LSE_i) — the forward's probabilities recomputed
//        from the stored log-sum-exp, no max or sum needed;
//     3. dV_blk += Pᵀ · dO_blk;
//     4. dP = dO_blk · V_blkᵀ;
//     5. dS_ij = P_ij · (dP_ij - D_i);
//     6. dQ_blk += scale · dS · K_blk   (atomic adds across key blocks on the
//                                       GPU; here a double buffer);
//     7. dK_blk += scale · dSᵀ · Q_blk.
//   dK_blk and dV_blk are then written (with GQA, summed over the query heads
//   of the kv head's group).
//
// ---------------------------------------------------------------- errors
// Non-positive sizes, kv_heads not dividing heads, spans of the wrong size,
// non-positive block sizes, a non-finite or non-positive scale, causal with
// seq_q > seq_kv and sizes whose element counts overflow int64 throw
// lacuna::Error.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace lacuna::kernels {

struct AttentionShape {
  int64_t batch = 1;
  int64_t heads = 1;     // query heads (per rank)
  int64_t kv_heads = 1;  // divides heads
  int64_t seq_q = 1;
  int64_t seq_kv = 1;
  int64_t head_dim = 1;
  bool causal = false;
  std::optional<double> softmax_scale;  // unset: 1/sqrt(head_dim)

  double scale() const;
  int64_t q_elements() const;    // batch·seq_q·heads·head_dim (Q, O, dQ, dO)
  int64_t kv_elements() const;   // batch·seq_kv·kv_heads·head_dim (K, V, dK, dV)
  int64_t lse_elements() const;  // batch·heads·seq_q
  void validate() const;         // throws lacuna::Error
};

// Br (query rows) × Bc (key columns) of the tiled algorithm. Blocks larger
// than the sequence are clamped to it; they need not divide it.
struct AttentionBlocks {
  int64_t block_q = 64;
  int64_t block_kv = 64;
};

template <typename T>
struct AttentionForwardResult {
  std::vector<T> out;  // [batch, seq_q, heads, head_dim]
  std::vector<T> lse;  // [batch, heads, seq_q]
};

template <typename T>
struct AttentionGradients {
  std::vector<T> dq;  // like Q
  std::vector<T> dk;  // like K
  std::vector<T> dv;  // like V
};

// The reference: the full seq_q × seq_kv score matrix per head, a max-subtracted
// softmax per row, O = P·V.
template <typename T>
AttentionForwardResult<T> attention_forward_naive(const AttentionShape& shape, std::span<const T> q,
                                                  std::span<const T> k, std::span<const T> v);

// The reference backward: P recomputed by the full softmax (the LSE is not
// needed), dV = Pᵀ·dO, dP = dO·Vᵀ, dS = P∘(dP - D) with D = rowsum(dO∘O),
// dQ = scale·dS·K, dK = scale·dSᵀ·Q.
template <typename T>
AttentionGradients<T> attention_backward_naive(const AttentionShape& shape, std::span<const T> q,
                                               std::span<const T> k, std::span<const T> v,
                                               std::span<const T> out, std::span<const T> dout);

// FlashAttention-2 forward (see the header comment).
template <typename T>
AttentionForwardResult<T> attention_forward_tiled(const AttentionShape& shape, const AttentionBlocks& blocks,
                                                  std::span<const T> q, std::span<const T> k,
                                                  std::span<const T> v);

// FlashAttention-2 backward (see the header comment): P from the forward's LSE.
template <typename T>
AttentionGradients<T> attention_backward_tiled(const AttentionShape& shape, const AttentionBlocks& blocks,
                                               std::span<const T> q, std::span<const T> k,
                                               std::span<const T> v, std::span<const T> out,
                                               std::span<const T> lse, std::span<const T> dout);

// FLOPs in docs/kernels.md's convention (sim/model/kernels.cpp): forward
// 4·batch·seq_q·seq_kv·heads·head_dim (QKᵀ and P·V, 2 FLOPs per MAC), exactly
// ½ of that when causal (the masked half is skipped); backward 2.5 × forward
// (FA2: five matmuls with P recomputed, against the forward's two).
double attention_forward_flops(const AttentionShape& shape);
double attention_backward_flops(const AttentionShape& shape);

#define LACUNA_REF_ATTENTION_EXTERN(T)                                                                          \
  extern template AttentionForwardResult<T> attention_forward_naive<T>(                                        \
      const AttentionShape&, std::span<const T>, std::span<const T>, std::span<const T>);                      \
  extern template AttentionGradients<T> attention_backward_naive<T>(                                           \
      const AttentionShape&, std::span<const T>, std::span<const T>, std::span<const T>, std::span<const T>,   \
      std::span<const T>);                                                                                      \
  extern template AttentionForwardResult<T> attention_forward_tiled<T>(                                        \
      const AttentionShape&, const AttentionBlocks&, std::span<const T>, std::span<const T>,                   \
      std::span<const T>);                                                                                      \
  extern template AttentionGradients<T> attention_backward_tiled<T>(                                           \
      const AttentionShape&, const AttentionBlocks&, std::span<const T>, std::span<const T>,                   \
      std::span<const T>, std::span<const T>, std::span<const T>, std::span<const T>);
LACUNA_REF_ATTENTION_EXTERN(float)
LACUNA_REF_ATTENTION_EXTERN(double)
#undef LACUNA_REF_ATTENTION_EXTERN

}  // namespace lacuna::kernels
