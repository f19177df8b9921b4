#include "kernels/ref_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "sim/core/error.h"

namespace lacuna::kernels {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

[[noreturn]] void fail(const std::string& what, const std::string& fix = {}) {
  throw Error(SourceLocation{}, "attention: " + what, fix);
}

int64_t checked_product(std::initializer_list<int64_t> factors) {
  int64_t p = 1;
  for (int64_t f : factors) {
    if (f <= 0) fail("non-positive size in an element count");
    if (p > std::numeric_limits<int64_t>::max() / f) fail("element count overflows int64", "use smaller shapes");
    p *= f;
  }
  return p;
}

template <typename T>
void check_span(std::span<const T> s, int64_t expected, const char* name) {
  if (static_cast<int64_t>(s.size()) != expected) {
    fail(std::string(name) + " has " + std::to_string(s.size()) + " elements, the shape needs " +
         std::to_string(expected));
  }
}

void check_blocks(const AttentionBlocks& b) {
  if (b.block_q < 1 || b.block_kv < 1) {
    fail("block sizes must be >= 1 (block_q " + std::to_string(b.block_q) + ", block_kv " +
         std::to_string(b.block_kv) + ")");
  }
}

// Index helpers for the documented layout.
struct Layout {
  int64_t sq, skv, h, g, d, group;
  explicit Layout(const AttentionShape& s)
      : sq(s.seq_q), skv(s.seq_kv), h(s.heads), g(s.kv_heads), d(s.head_dim), group(s.heads / s.kv_heads) {}
  int64_t q(int64_t b, int64_t i, int64_t head) const { return ((b * sq + i) * h + head) * d; }
  int64_t kv(int64_t b, int64_t j, int64_t kvh) const { return ((b * skv + j) * g + kvh) * d; }
  int64_t lse(int64_t b, int64_t head, int64_t i) const { return (b * h + head) * sq + i; }
};

template <typename T>
double dot(const T* a, const T* b, int64_t n) {
  double s = 0.0;
  for (int64_t c = 0; c < n; ++c) s += static_cast<double>(a[c]) * static_cast<double>(b[c]);
  return s;
}

// Last key (exclusive) row i may see.
int64_t key_end(const AttentionShape& s, int64_t i) {
  return s.causal ? std::min(s.seq_kv, i + (s.seq_kv - s.seq_q) + 1) : s.seq_kv;
}

// One query row of the naive algorithm: p[j] = exp(scale·q·k_j − m) for the
// keys it sees, with m their maximum; returns (m, Σ p).
template <typename T>
std::pair<double, double> exp_scores(const T* qi, const T* k, const Layout& L, int64_t b, int64_t g, int64_t end,
                                     double scale, std::vector<double>& p) {
  double m = kNegInf;
  for (int64_t j = 0; j < end; ++j) {
    p[j] = scale * dot(qi, k + L.kv(b, j, g), L.d);
    m = std::max(m, p[j]);
  }
  double l = 0.0;
  for (int64_t j = 0; j < end; ++j) {
    p[j] = std::exp(p[j] - m);
    l += p[j];
  }
  return {m, l};
}

}  // namespace

// ---------------------------------------------------------------- shape

double AttentionShape::scale() const {
  return softmax_scale ? *softmax_scale : 1.0 / std::sqrt(static_cast<double>(head_dim));
}

int64_t AttentionShape::q_elements() const { return checked_product({batch, seq_q, heads, head_dim}); }
int64_t AttentionShape::kv_elements() const { return checked_product({batch, seq_kv, kv_heads, head_dim}); }
int64_t AttentionShape::lse_elements() const { return checked_product({batch, heads, seq_q}); }

void AttentionShape::validate() const {
  auto positive = [](int64_t v, const char* name) {
    if (v < 1) fail(std::string(name) + " must be >= 1, got " + std::to_string(v));
  };
  positive(batch, "batch");
  positive(heads, "heads");
  positive(kv_heads, "kv_heads");
  positive(seq_q, "seq_q");
  positive(seq_kv, "seq_kv");
  positive(head_dim, "head_dim");
  if (heads % kv_heads != 0) {
    fail("kv_heads " + std::to_string(kv_heads) + " does not divide heads " + std::to_string(heads),
         "GQA needs heads to be a multiple of kv_heads");
  }
  if (causal && seq_q > seq_kv) {
    fail("causal attention with seq_q " + std::to_string(seq_q) + " > seq_kv " + std::to_string(seq_kv) +
             " leaves query rows without keys",
         "causal masking is bottom-right aligned; use seq_q <= seq_kv");
  }
  if (softmax_scale && !(std::isfinite(*softmax_scale) && *softmax_scale > 0.0)) {
    fail("softmax_scale must be finite and > 0");
  }
  // Element counts and the naive score matrix must fit in int64.
  (void)q_elements();
  (void)kv_elements();
  (void)lse_elements();
  (void)checked_product({seq_q, seq_kv});
}

double attention_forward_flops(const AttentionShape& shape) {
  shape.validate();
  const double full = 4.0 * static_cast<double>(shape.batch) * static_cast<double>(shape.seq_q) *
                      static_cast<double>(shape.seq_kv) * static_cast<double>(shape.heads) *
                      static_cast<double>(shape.head_dim);
  return shape.causal ? full / 2.0 : full;
}

double attention_backward_flops(const AttentionShape& shape) { return 2.5 * attention_forward_flops(shape); }

// ---------------------------------------------------------------- naive

template <typename T>
AttentionForwardResult<T> attention_forward_naive(const AttentionShape& shape, std::span<const T> q,
                                                  std::span<const T> k, std::span<const T> v) {
  shape.validate();
  check_span(q, shape.q_elements(), "Q");
  check_span(k, shape.kv_elements(), "K");
  check_span(v, shape.kv_elements(), "V");
  const Layout L(shape);
  const double scale = shape.scale();
  AttentionForwardResult<T> r;
  r.out.assign(static_cast<size_t>(shape.q_elements()), T(0));
  r.lse.assign(static_cast<size_t>(shape.lse_elements()), T(0));
  std::vector<double> p(static_cast<size_t>(L.skv));
  std::vector<double> acc(static_cast<size_t>(L.d));
  for (int64_t b = 0; b < shape.batch; ++b) {
    for (int64_t h = 0; h < L.h; ++h) {
      const int64_t g = h / L.group;
      for (int64_t i = 0; i < L.sq; ++i) {
        const T* qi = q.data() + L.q(b, i, h);
        const int64_t end = key_end(shape, i);  // >= 1 by validate()
        const auto [m, l] = exp_scores(qi, k.data(), L, b, g, end, scale, p);
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j = 0; j < end; ++j) {
          const T* vj = v.data() + L.kv(b, j, g);
          for (int64_t c = 0; c < L.d; ++c) acc[c] += p[j] * static_cast<double>(vj[c]);
        }
        T* oi = r.out.data() + L.q(b, i, h);
        for (int64_t c = 0; c < L.d; ++c) oi[c] = static_cast<T>(acc[c] / l);
        r.lse[L.lse(b, h, i)] = static_cast<T>(m + std::log(l));
      }
    }
  }
  return r;
}

template <typename T>
AttentionGradients<T> attention_backward_naive(const AttentionShape& shape, std::span<const T> q,
                                               std::span<const T> k, std::span<const T> v,
                                               std::span<const T> out, std::span<const T> dout) {
  shape.validate();
  check_span(q, shape.q_elements(), "Q");
  check_span(k, shape.kv_elements(), "K");
  check_span(v, shape.kv_elements(), "V");
  check_span(out, shape.q_elements(), "O");
  check_span(dout, shape.q_elements(), "dO");
  const Layout L(shape);
  const double scale = shape.scale();
  std::vector<double> dq(static_cast<size_t>(shape.q_elements()), 0.0);
  std::vector<double> dk(static_cast<size_t>(shape.kv_elements()), 0.0);
  std::vector<double> dv(static_cast<size_t>(shape.kv_elements()), 0.0);
  std::vector<double> p(static_cast<size_t>(L.skv));
  for (int64_t b = 0; b < shape.batch; ++b) {
    for (int64_t h = 0; h < L.h; ++h) {
      const int64_t g = h / L.group;
      for (int64_t i = 0; i < L.sq; ++i) {
        const int64_t qo = L.q(b, i, h);
        const T* qi = q.data() + qo;
        const T* doi = dout.data() + qo;
        const int64_t end = key_end(shape, i);
        // Softmax row, materialised.
        const double l = exp_scores(qi, k.data(), L, b, g, end, scale, p).second;
        for (int64_t j = 0; j < end; ++j) p[j] /= l;
        const double D = dot(doi, out.data() + qo, L.d);
        for (int64_t j = 0; j < end; ++j) {
          const int64_t ko = L.kv(b, j, g);
          const double dp = dot(doi, v.data() + ko, L.d);
          const double ds = p[j] * (dp - D);
          for (int64_t c = 0; c < L.d; ++c) {
            dv[ko + c] += p[j] * static_cast<double>(doi[c]);
            dq[qo + c] += scale * ds * static_cast<double>(k[ko + c]);
            dk[ko + c] += scale * ds * static_cast<double>(qi[c]);
          }
        }
      }
    }
  }
  AttentionGradients<T> r;
  r.dq.assign(dq.begin(), dq.end());
  r.dk.assign(dk.begin(), dk.end());
  r.dv.assign(dv.begin(), dv.end());
  return r;
}

// ---------------------------------------------------------------- tiled (FlashAttention-2)

template <typename T>
AttentionForwardResult<T> attention_forward_tiled(const AttentionShape& shape, const AttentionBlocks& blocks,
                                                  std::span<const T> q, std::span<const T> k,
                                                  std::span<const T> v) {
  shape.validate();
  check_blocks(blocks);
  check_span(q, shape.q_elements(), "Q");
  check_span(k, shape.kv_elements(), "K");
  check_span(v, shape.kv_elements(), "V");
  const Layout L(shape);
  const double scale = shape.scale();
  const int64_t br = std::min(blocks.block_q, L.sq);
  const int64_t bc = std::min(blocks.block_kv, L.skv);
  const int64_t offset = L.skv - L.sq;  // causal: row i sees keys j <= i + offset

  AttentionForwardResult<T> res;
  res.out.assign(static_cast<size_t>(shape.q_elements()), T(0));
  res.lse.assign(static_cast<size_t>(shape.lse_elements()), T(0));

  // Per-block state (registers / shared memory on the GPU).
  std::vector<double> s(static_cast<size_t>(br * bc));  // scores, then probabilities
  std::vector<double> m(static_cast<size_t>(br));        // running max per row
  std::vector<double> l(static_cast<size_t>(br));        // running sum per row
  std::vector<double> acc(static_cast<size_t>(br * L.d));  // running P·V per row

  for (int64_t b = 0; b < shape.batch; ++b) {
    for (int64_t h = 0; h < L.h; ++h) {
      const int64_t g = h / L.group;
      for (int64_t i0 = 0; i0 < L.sq; i0 += br) {
        const int64_t i1 = std::min(i0 + br, L.sq);
        const int64_t rows = i1 - i0;
        std::fill(m.begin(), m.end(), kNegInf);
        std::fill(l.begin(), l.end(), 0.0);
        std::fill(acc.begin(), acc.end(), 0.0);
        // Causal block skipping: keys past the last row's diagonal are never visited.
        const int64_t kv_end = shape.causal ? std::min(L.skv, i1 - 1 + offset + 1) : L.skv;
        for (int64_t j0 = 0; j0 < kv_end; j0 += bc) {
          const int64_t j1 = std::min(j0 + bc, L.skv);
          const int64_t cols = j1 - j0;
          // Only blocks straddling the diagonal need the element mask.
          const bool needs_mask = shape.causal && (j1 - 1 > i0 + offset);
          for (int64_t row = 0; row < rows; ++row) {
            const int64_t i = i0 + row;
            const T* qi = q.data() + L.q(b, i, h);
            double* srow = s.data() + row * bc;
            // 1. scores (masked: -inf); 2. the new running max.
            double row_max = kNegInf;
            for (int64_t c = 0; c < cols; ++c) {
              const int64_t j = j0 + c;
              srow[c] = (needs_mask && j > i + offset) ? kNegInf : scale * dot(qi, k.data() + L.kv(b, j, g), L.d);
              row_max = std::max(row_max, srow[c]);
            }
            const double m_new = std::max(m[row], row_max);
            if (m_new == kNegInf) continue;  // nothing visible yet in this row: state unchanged
            // 3. rescale factor; 4. probabilities relative to m_new; 5. accumulate.
            const double alpha = std::exp(m[row] - m_new);  // exp(-inf) = 0 on the first visible block
            double row_sum = 0.0;
            for (int64_t c = 0; c < cols; ++c) {
              srow[c] = std::exp(srow[c] - m_new);  // masked: exp(-inf) = 0
              row_sum += srow[c];
            }
            l[row] = alpha * l[row] + row_sum;
            double* a = acc.data() + row * L.d;
            for (int64_t x = 0; x < L.d; ++x) a[x] *= alpha;
            for (int64_t c = 0; c < cols; ++c) {
              const T* vj = v.data() + L.kv(b, j0 + c, g);
              for (int64_t x = 0; x < L.d; ++x) a[x] += srow[c] * static_cast<double>(vj[x]);
            }
            m[row] = m_new;  // 6.
          }
        }
        // Epilogue: normalise once and write O and LSE.
        for (int64_t row = 0; row < rows; ++row) {
          const int64_t i = i0 + row;
          T* oi = res.out.data() + L.q(b, i, h);
          const double* a = acc.data() + row * L.d;
          for (int64_t x = 0; x < L.d; ++x) oi[x] = static_cast<T>(a[x] / l[row]);
          res.lse[L.lse(b, h, i)] = static_cast<T>(m[row] + std::log(l[row]));
        }
      }
    }
  }
  return res;
}

template <typename T>
AttentionGradients<T> attention_backward_tiled(const AttentionShape& shape, const AttentionBlocks& blocks,
                                               std::span<const T> q, std::span<const T> k,
                                               std::span<const T> v, std::span<const T> out,
                                               std::span<const T> lse, std::span<const T> dout) {
  shape.validate();
  check_blocks(blocks);
  check_span(q, shape.q_elements(), "Q");
  check_span(k, shape.kv_elements(), "K");
  check_span(v, shape.kv_elements(), "V");
  check_span(out, shape.q_elements(), "O");
  check_span(lse, shape.lse_elements(), "LSE");
  check_span(dout, shape.q_elements(), "dO");
  const Layout L(shape);
  const double scale = shape.scale();
  const int64_t br = std::min(blocks.block_q, L.sq);
  const int64_t bc = std::min(blocks.block_kv, L.skv);
  const int64_t offset = L.skv - L.sq;

  // Preprocessing: D_i = rowsum(dO ∘ O), laid out like the LSE.
  std::vector<double> D(static_cast<size_t>(shape.lse_elements()));
  for (int64_t b = 0; b < shape.batch; ++b)
    for (int64_t h = 0; h < L.h; ++h)
      for (int64_t i = 0; i < L.sq; ++i)
        D[L.lse(b, h, i)] = dot(dout.data() + L.q(b, i, h), out.data() + L.q(b, i, h), L.d);

  // dQ is accumulated across key blocks (atomics on the GPU); dK/dV across the
  // query heads of a GQA group.
  std::vector<double> dq(static_cast<size_t>(shape.q_elements()), 0.0);
  std::vector<double> dk(static_cast<size_t>(shape.kv_elements()), 0.0);
  std::vector<double> dv(static_cast<size_t>(shape.kv_elements()), 0.0);
  std::vector<double> dk_blk(static_cast<size_t>(bc * L.d));
  std::vector<double> dv_blk(static_cast<size_t>(bc * L.d));
  std::vector<double> p(static_cast<size_t>(br * bc));

  for (int64_t b = 0; b < shape.batch; ++b) {
    for (int64_t h = 0; h < L.h; ++h) {
      const int64_t g = h / L.group;
      for (int64_t j0 = 0; j0 < L.skv; j0 += bc) {
        const int64_t j1 = std::min(j0 + bc, L.skv);
        const int64_t cols = j1 - j0;
        std::fill(dk_blk.begin(), dk_blk.end(), 0.0);
        std::fill(dv_blk.begin(), dv_blk.end(), 0.0);
        // Causal block skipping: the first row that sees key j0 is j0 - offset.
        const int64_t i_first = shape.causal ? std::max<int64_t>(0, j0 - offset) : 0;
        for (int64_t i0 = (i_first / br) * br; i0 < L.sq; i0 += br) {
          const int64_t i1 = std::min(i0 + br, L.sq);
          const int64_t rows = i1 - i0;
          const bool needs_mask = shape.causal && (j1 - 1 > i0 + offset);
          // 1.–2. P = exp(scale·Q Kᵀ - LSE), masked entries 0.
          for (int64_t row = 0; row < rows; ++row) {
            const int64_t i = i0 + row;
            const T* qi = q.data() + L.q(b, i, h);
            const double lse_i = static_cast<double>(lse[L.lse(b, h, i)]);
            for (int64_t c = 0; c < cols; ++c) {
              const int64_t j = j0 + c;
              p[row * bc + c] = (needs_mask && j > i + offset)
                                    ? 0.0
                                    : std::exp(scale * dot(qi, k.data() + L.kv(b, j, g), L.d) - lse_i);
            }
          }
          for (int64_t row = 0; row < rows; ++row) {
            const int64_t i = i0 + row;
            const int64_t qo = L.q(b, i, h);
            const T* qi = q.data() + qo;
            const T* doi = dout.data() + qo;
            const double D_i = D[L.lse(b, h, i)];
            double* dqi = dq.data() + qo;
            for (int64_t c = 0; c < cols; ++c) {
              const double pij = p[row * bc + c];
              if (pij == 0.0) continue;  // masked (or underflowed): contributes nothing
              const int64_t ko = L.kv(b, j0 + c, g);
              // 3. dV += Pᵀ dO
              double* dvj = dv_blk.data() + c * L.d;
              for (int64_t x = 0; x < L.d; ++x) dvj[x] += pij * static_cast<double>(doi[x]);
              // 4. dP = dO Vᵀ; 5. dS = P ∘ (dP - D)
              const double ds = pij * (dot(doi, v.data() + ko, L.d) - D_i);
              // 6. dQ += scale·dS K; 7. dK += scale·dSᵀ Q
              double* dkj = dk_blk.data() + c * L.d;
              for (int64_t x = 0; x < L.d; ++x) {
                dqi[x] += scale * ds * static_cast<double>(k[ko + x]);
                dkj[x] += scale * ds * static_cast<double>(qi[x]);
              }
            }
          }
        }
        // Write the key block's dK, dV (summed over the GQA group).
        for (int64_t c = 0; c < cols; ++c) {
          const int64_t ko = L.kv(b, j0 + c, g);
          for (int64_t x = 0; x < L.d; ++x) {
            dk[ko + x] += dk_blk[c * L.d + x];
            dv[ko + x] += dv_blk[c * L.d + x];
          }
        }
      }
    }
  }
  AttentionGradients<T> res;
  res.dq.assign(dq.begin(), dq.end());
  res.dk.assign(dk.begin(), dk.end());
  res.dv.assign(dv.begin(), dv.end());
  return res;
}

#define LACUNA_REF_ATTENTION_INSTANTIATE(T)                                                                      \
  template AttentionForwardResult<T> attention_forward_naive<T>(const AttentionShape&, std::span<const T>,      \
                                                                std::span<const T>, std::span<const T>);        \
  template AttentionGradients<T> attention_backward_naive<T>(const AttentionShape&, std::span<const T>,         \
                                                             std::span<const T>, std::span<const T>,            \
                                                             std::span<const T>, std::span<const T>);           \
  template AttentionForwardResult<T> attention_forward_tiled<T>(const AttentionShape&, const AttentionBlocks&,  \
                                                                std::span<const T>, std::span<const T>,         \
                                                                std::span<const T>);                            \
  template AttentionGradients<T> attention_backward_tiled<T>(                                                   \
      const AttentionShape&, const AttentionBlocks&, std::span<const T>, std::span<const T>, std::span<const T>, \
      std::span<const T>, std::span<const T>, std::span<const T>);
LACUNA_REF_ATTENTION_INSTANTIATE(float)
LACUNA_REF_ATTENTION_INSTANTIATE(double)
#undef LACUNA_REF_ATTENTION_INSTANTIATE

}  // namespace lacuna::kernels
