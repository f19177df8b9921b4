#include "kernels/ref_attention.h"
#include "kernels/ref_test_support.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "sim/core/error.h"

namespace lacuna::kernels {
namespace {

using ref::testing::attention_shape;
using ref::testing::describe;

// Deterministic, platform-independent values in ±[0.25, 1] (never zero):
// splitmix64 rather than <random> distributions, whose output differs between
// standard libraries.
template <typename T>
std::vector<T> random_values(int64_t n, uint64_t seed, double magnitude = 1.0) {
  std::vector<T> out(static_cast<size_t>(n));
  uint64_t state = seed * 0x9E3779B97F4A7C15ULL + 1;
  for (auto& x : out) {
    state += 0x9E3779B97F4A7C15ULL;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    const double u = static_cast<double>(z >> 11) / 9007199254740992.0;  // [0, 1)
    const double mag = 0.25 + 0.75 * std::fmod(u * 2.0, 1.0);
    x = static_cast<T>(magnitude * (u < 0.5 ? -mag : mag));
  }
  return out;
}

// max_i |a_i - b_i| / max(|b_i|, 1e-6 · max|b|): relative, with a floor so that
// entries cancelling to ~0 are judged against the tensor's scale.
template <typename T>
double max_rel_error(const std::vector<T>& a, const std::vector<T>& b) {
  EXPECT_EQ(a.size(), b.size());
  double scale = 0.0;
  for (T x : b) scale = std::max(scale, std::abs(static_cast<double>(x)));
  double worst = 0.0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    const double x = static_cast<double>(a[i]), y = static_cast<double>(b[i]);
    if (!std::isfinite(x) || !std::isfinite(y)) return INFINITY;  // NaN never passes
    if (x == y) continue;  // also covers exact zeros (a single key: dQ = dK = 0)
    worst = std::max(worst, std::abs(x - y) / std::max(std::abs(y), 1e-6 * scale));
  }
  return worst;
}

template <typename T>
std::span<const T> cs(const std::vector<T>& v) {
  return {v.data(), v.size()};
}

// max_i |a_i - b_i| / max_i |b_i|: the error relative to the tensor's scale.
template <typename T>
double normwise_rel_error(const std::vector<T>& a, const std::vector<T>& b) {
  EXPECT_EQ(a.size(), b.size());
  double scale = 0.0, worst = 0.0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    const double x = static_cast<double>(a[i]), y = static_cast<double>(b[i]);
    if (!std::isfinite(x) || !std::isfinite(y)) return INFINITY;
    scale = std::max(scale, std::abs(y));
    worst = std::max(worst, std::abs(x - y));
  }
  return worst == 0.0 ? 0.0 : worst / scale;
}

// Tiled forward and backward against the naive reference over block sizes
// that do and do not divide the sequence, causal and not, MHA and GQA.
// In double storage every element matches within 1e-5 relative (in practice
// ~1e-13). In float storage the forward still does, element by element; the
// backward's P = exp(S - LSE) inherits the float LSE's rounding (absolute
// ~|LSE|·6e-8, hence relative in P), which gradients that cancel to small
// entries magnify, so float gradients are compared relative to the tensor's
// largest entry — exactly what a GPU kernel storing an fp32 LSE faces too.
template <typename T>
void sweep(int64_t seq_q, int64_t seq_kv, uint64_t seed) {
  for (bool causal : {false, true}) {
    for (int64_t kv_heads : {int64_t{4}, int64_t{2}}) {  // MHA, GQA (2 query heads per kv head)
      AttentionShape s;
      s.batch = seq_kv > 64 ? 1 : 2;
      s.heads = 4;
      s.kv_heads = kv_heads;
      s.seq_q = seq_q;
      s.seq_kv = seq_kv;
      s.head_dim = 8;
      s.causal = causal;
      SCOPED_TRACE(describe(s));
      const auto q = random_values<T>(s.q_elements(), seed + 1);
      const auto k = random_values<T>(s.kv_elements(), seed + 2);
      const auto v = random_values<T>(s.kv_elements(), seed + 3);
      const auto dout = random_values<T>(s.q_elements(), seed + 4);
      const auto ref = attention_forward_naive<T>(s, cs(q), cs(k), cs(v));
      const auto ref_grad = attention_backward_naive<T>(s, cs(q), cs(k), cs(v), cs(ref.out), cs(dout));
      const auto grad_error = [](const std::vector<T>& a, const std::vector<T>& b) {
        return std::is_same_v<T, double> ? max_rel_error(a, b) : normwise_rel_error(a, b);
      };
      for (int64_t br : {1, 16, 32}) {
        for (int64_t bc : {1, 16, 32}) {
          SCOPED_TRACE("Br " + std::to_string(br) + " Bc " + std::to_string(bc));
          const AttentionBlocks blocks{br, bc};
          const auto fwd = attention_forward_tiled<T>(s, blocks, cs(q), cs(k), cs(v));
          EXPECT_LT(max_rel_error(fwd.out, ref.out), 1e-5);
          EXPECT_LT(max_rel_error(fwd.lse, ref.lse), 1e-5);
          const auto grad =
              attention_backward_tiled<T>(s, blocks, cs(q), cs(k), cs(v), cs(fwd.out), cs(fwd.lse), cs(dout));
          EXPECT_LT(grad_error(grad.dq, ref_grad.dq), 1e-5);
          EXPECT_LT(grad_error(grad.dk, ref_grad.dk), 1e-5);
          EXPECT_LT(grad_error(grad.dv, ref_grad.dv), 1e-5);
        }
      }
    }
  }
}

TEST(RefAttentionTiled, MatchesNaiveSeq1) {
  sweep<double>(1, 1, 100);
  sweep<float>(1, 1, 100);
}
TEST(RefAttentionTiled, MatchesNaiveSeq7) {
  sweep<double>(7, 7, 200);
  sweep<float>(7, 7, 200);
}
TEST(RefAttentionTiled, MatchesNaiveSeq64) {
  sweep<double>(64, 64, 300);
  sweep<float>(64, 64, 300);
}
TEST(RefAttentionTiled, MatchesNaiveSeq100) {
  sweep<double>(100, 100, 400);
  sweep<float>(100, 100, 400);
}
// A chunk of the latest queries against a longer key sequence (bottom-right causal).
TEST(RefAttentionTiled, MatchesNaiveQueryChunk) {
  sweep<double>(37, 100, 500);
  sweep<float>(37, 100, 500);
}

// Scores in the thousands: the online softmax only ever exponentiates s - m <= 0.
TEST(RefAttentionTiled, LargeScoresStayFiniteAndMatch) {
  AttentionShape s = attention_shape(1, 2, 1, 40, 40, 16);
  for (bool causal : {false, true}) {
    s.causal = causal;
    const auto q = random_values<float>(s.q_elements(), 11, 30.0);
    const auto k = random_values<float>(s.kv_elements(), 12, 30.0);
    const auto v = random_values<float>(s.kv_elements(), 13);
    const auto dout = random_values<float>(s.q_elements(), 14);
    const auto ref = attention_forward_naive<float>(s, cs(q), cs(k), cs(v));
    const auto fwd = attention_forward_tiled<float>(s, {16, 16}, cs(q), cs(k), cs(v));
    EXPECT_LT(max_rel_error(fwd.out, ref.out), 1e-5);
    EXPECT_LT(max_rel_error(fwd.lse, ref.lse), 1e-5);
    EXPECT_GT(*std::max_element(ref.lse.begin(), ref.lse.end()), 500.0f);
    const auto rg = attention_backward_naive<float>(s, cs(q), cs(k), cs(v), cs(ref.out), cs(dout));
    const auto tg = attention_backward_tiled<float>(s, {16, 16}, cs(q), cs(k), cs(v), cs(fwd.out), cs(fwd.lse),
                                                    cs(dout));
    // Nearly one-hot rows: P is recomputed from an LSE rounded to float, whose
    // absolute error (~1e-4 at |LSE| ~ 1e3) becomes a relative error of P.
    EXPECT_LT(normwise_rel_error(tg.dv, rg.dv), 1e-3);
    EXPECT_LT(normwise_rel_error(tg.dq, rg.dq), 1e-3);
    for (float x : tg.dq) ASSERT_TRUE(std::isfinite(x));
  }
}

TEST(RefAttentionTiled, DeterministicAcrossRuns) {
  const AttentionShape s = attention_shape(1, 2, 2, 9, 9, 4, true);
  const auto q = random_values<float>(s.q_elements(), 21);
  const auto k = random_values<float>(s.kv_elements(), 22);
  const auto v = random_values<float>(s.kv_elements(), 23);
  const auto a = attention_forward_tiled<float>(s, {4, 3}, cs(q), cs(k), cs(v));
  const auto b = attention_forward_tiled<float>(s, {4, 3}, cs(q), cs(k), cs(v));
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.lse, b.lse);
}

// ---------------------------------------------------------------- closed forms

// Every key the same → all scores of a row equal → uniform weights: O_i is the
// mean of the V rows it may see, LSE_i = scale·q_i·k + log(#keys).
TEST(RefAttentionClosedForm, IdenticalKeysAverageValues) {
  for (bool causal : {false, true}) {
    for (int64_t seq_q : {int64_t{6}, int64_t{4}}) {  // 4: a causal chunk against 6 keys
      const AttentionShape s = attention_shape(2, 2, 1, seq_q, 6, 3, causal);
      SCOPED_TRACE(describe(s));
      const auto q = random_values<double>(s.q_elements(), 31);
      const auto v = random_values<double>(s.kv_elements(), 32);
      const std::vector<double> key{0.5, -0.75, 0.3};
      std::vector<double> k(static_cast<size_t>(s.kv_elements()));
      for (size_t i = 0; i < k.size(); ++i) k[i] = key[i % 3];
      const auto naive = attention_forward_naive<double>(s, cs(q), cs(k), cs(v));
      const auto tiled = attention_forward_tiled<double>(s, {3, 4}, cs(q), cs(k), cs(v));
      const int64_t offset = s.seq_kv - s.seq_q;
      for (int64_t b = 0; b < s.batch; ++b) {
        for (int64_t h = 0; h < s.heads; ++h) {
          for (int64_t i = 0; i < s.seq_q; ++i) {
            const int64_t n = causal ? i + offset + 1 : s.seq_kv;
            double qk = 0.0;
            for (int64_t c = 0; c < 3; ++c) qk += q[((b * s.seq_q + i) * s.heads + h) * 3 + c] * key[c];
            const double lse = s.scale() * qk + std::log(static_cast<double>(n));
            EXPECT_NEAR(naive.lse[(b * s.heads + h) * s.seq_q + i], lse, 1e-12);
            EXPECT_NEAR(tiled.lse[(b * s.heads + h) * s.seq_q + i], lse, 1e-12);
            for (int64_t c = 0; c < 3; ++c) {
              double mean = 0.0;
              for (int64_t j = 0; j < n; ++j) mean += v[(b * s.seq_kv + j) * 3 + c];  // kv_heads = 1
              mean /= static_cast<double>(n);
              const size_t o = static_cast<size_t>(((b * s.seq_q + i) * s.heads + h) * 3 + c);
              EXPECT_NEAR(naive.out[o], mean, 1e-12);
              EXPECT_NEAR(tiled.out[o], mean, 1e-12);
            }
          }
        }
      }
    }
  }
}

// One key: P = 1, so O = that V row, LSE = the score, dQ = dK = 0 and
// dV = Σ dO over every query row and every query head of the group.
TEST(RefAttentionClosedForm, SingleKeyReturnsItsValue) {
  const AttentionShape s = attention_shape(2, 4, 2, 1, 1, 5, true);
  const auto q = random_values<double>(s.q_elements(), 41);
  const auto k = random_values<double>(s.kv_elements(), 42);
  const auto v = random_values<double>(s.kv_elements(), 43);
  const auto dout = random_values<double>(s.q_elements(), 44);
  const auto f = attention_forward_tiled<double>(s, {1, 1}, cs(q), cs(k), cs(v));
  const auto g = attention_backward_tiled<double>(s, {1, 1}, cs(q), cs(k), cs(v), cs(f.out), cs(f.lse), cs(dout));
  const auto gn = attention_backward_naive<double>(s, cs(q), cs(k), cs(v), cs(f.out), cs(dout));
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t h = 0; h < 4; ++h) {
      const int64_t kvh = h / 2;
      double qk = 0.0;
      for (int64_t c = 0; c < 5; ++c) qk += q[(b * 4 + h) * 5 + c] * k[(b * 2 + kvh) * 5 + c];
      EXPECT_NEAR(f.lse[b * 4 + h], s.scale() * qk, 1e-12);
      for (int64_t c = 0; c < 5; ++c) EXPECT_DOUBLE_EQ(f.out[(b * 4 + h) * 5 + c], v[(b * 2 + kvh) * 5 + c]);
    }
    for (int64_t kvh = 0; kvh < 2; ++kvh) {
      for (int64_t c = 0; c < 5; ++c) {
        const double sum = dout[(b * 4 + 2 * kvh) * 5 + c] + dout[(b * 4 + 2 * kvh + 1) * 5 + c];
        EXPECT_NEAR(g.dv[(b * 2 + kvh) * 5 + c], sum, 1e-12);
        EXPECT_NEAR(gn.dv[(b * 2 + kvh) * 5 + c], sum, 1e-12);
      }
    }
  }
  for (double x : g.dq) EXPECT_NEAR(x, 0.0, 1e-12);
  for (double x : g.dk) EXPECT_NEAR(x, 0.0, 1e-12);
  for (double x : gn.dq) EXPECT_NEAR(x, 0.0, 1e-12);
  for (double x : gn.dk) EXPECT_NEAR(x, 0.0, 1e-12);
}

// ---------------------------------------------------------------- finite differences

// L = Σ dO ∘ O(Q, K, V); central differences in float64 against the naive backward.
TEST(RefAttentionGradient, NaiveBackwardMatchesFiniteDifferences) {
  const std::vector<AttentionShape> cases = {
      attention_shape(1, 2, 2, 5, 5, 3, false),
      attention_shape(1, 2, 2, 5, 5, 3, true),
      attention_shape(2, 4, 2, 4, 4, 2, true),  // GQA
      attention_shape(1, 3, 1, 3, 5, 2, true),  // MQA chunk
      attention_shape(1, 2, 1, 4, 3, 3, false, 0.8),
  };
  for (const auto& s : cases) {
    SCOPED_TRACE(describe(s));
    auto q = random_values<double>(s.q_elements(), 51);
    auto k = random_values<double>(s.kv_elements(), 52);
    auto v = random_values<double>(s.kv_elements(), 53);
    const auto dout = random_values<double>(s.q_elements(), 54);
    const auto fwd = attention_forward_naive<double>(s, cs(q), cs(k), cs(v));
    const auto grad = attention_backward_naive<double>(s, cs(q), cs(k), cs(v), cs(fwd.out), cs(dout));
    auto loss = [&] {
      const auto o = attention_forward_naive<double>(s, cs(q), cs(k), cs(v)).out;
      double l = 0.0;
      for (size_t i = 0; i < o.size(); ++i) l += dout[i] * o[i];
      return l;
    };
    auto check = [&](std::vector<double>& x, const std::vector<double>& analytic, const char* name) {
      SCOPED_TRACE(name);
      std::vector<double> numeric(x.size());
      const double eps = 1e-5;
      for (size_t i = 0; i < x.size(); ++i) {
        const double saved = x[i];
        x[i] = saved + eps;
        const double up = loss();
        x[i] = saved - eps;
        const double down = loss();
        x[i] = saved;
        numeric[i] = (up - down) / (2.0 * eps);
      }
      EXPECT_LT(max_rel_error(analytic, numeric), 1e-5);
    };
    check(q, grad.dq, "dQ");
    check(k, grad.dk, "dK");
    check(v, grad.dv, "dV");
  }
}

// ---------------------------------------------------------------- causality

// Changing keys and values at positions > t leaves rows <= t of O, LSE and dQ
// bit-identical (masked entries never enter a sum), and does change later rows.
TEST(RefAttentionCausal, FutureKeysDoNotChangeEarlierRows) {
  const AttentionShape s = attention_shape(1, 2, 1, 20, 20, 4, true);
  const int64_t t = 8;
  const auto q = random_values<float>(s.q_elements(), 61);
  const auto k = random_values<float>(s.kv_elements(), 62);
  const auto v = random_values<float>(s.kv_elements(), 63);
  const auto dout = random_values<float>(s.q_elements(), 64);
  auto k2 = k, v2 = v;
  const auto noise = random_values<float>(s.kv_elements(), 65);
  for (int64_t j = t + 1; j < s.seq_kv; ++j)
    for (int64_t c = 0; c < 4; ++c) {
      k2[j * 4 + c] += noise[j * 4 + c];  // kv_heads = 1
      v2[j * 4 + c] -= noise[j * 4 + c];
    }
  struct Run {
    AttentionForwardResult<float> f;
    AttentionGradients<float> g;
  };
  auto tiled = [&](const std::vector<float>& kk, const std::vector<float>& vv) {
    Run r{attention_forward_tiled<float>(s, {4, 4}, cs(q), cs(kk), cs(vv)), {}};
    r.g = attention_backward_tiled<float>(s, {4, 4}, cs(q), cs(kk), cs(vv), cs(r.f.out), cs(r.f.lse), cs(dout));
    return r;
  };
  auto naive = [&](const std::vector<float>& kk, const std::vector<float>& vv) {
    Run r{attention_forward_naive<float>(s, cs(q), cs(kk), cs(vv)), {}};
    r.g = attention_backward_naive<float>(s, cs(q), cs(kk), cs(vv), cs(r.f.out), cs(dout));
    return r;
  };
  for (const auto& [a, b] : {std::pair{tiled(k, v), tiled(k2, v2)}, std::pair{naive(k, v), naive(k2, v2)}}) {
    bool later_changed = false;
    for (int64_t i = 0; i < s.seq_q; ++i) {
      for (int64_t h = 0; h < 2; ++h) {
        for (int64_t c = 0; c < 4; ++c) {
          const size_t o = static_cast<size_t>((i * 2 + h) * 4 + c);
          if (i <= t) {
            EXPECT_EQ(a.f.out[o], b.f.out[o]) << "row " << i;
            EXPECT_EQ(a.g.dq[o], b.g.dq[o]) << "row " << i;
          } else {
            later_changed = later_changed || a.f.out[o] != b.f.out[o];
          }
        }
        if (i <= t) {
          EXPECT_EQ(a.f.lse[h * s.seq_q + i], b.f.lse[h * s.seq_q + i]);
        }
      }
    }
    EXPECT_TRUE(later_changed);
  }
}

// ---------------------------------------------------------------- scale, FLOPs, errors

TEST(RefAttentionShape, ScaleDefaultsToInverseSqrtHeadDimAndIsHonoured) {
  AttentionShape s = attention_shape(1, 1, 1, 5, 7, 4);
  EXPECT_DOUBLE_EQ(s.scale(), 0.5);
  // scale c on Q equals the default scale on Q·(c / default).
  const auto q = random_values<double>(s.q_elements(), 71);
  const auto k = random_values<double>(s.kv_elements(), 72);
  const auto v = random_values<double>(s.kv_elements(), 73);
  auto q3 = q;
  for (auto& x : q3) x *= 3.0;
  const auto by_scaled_q = attention_forward_naive<double>(s, cs(q3), cs(k), cs(v));
  s.softmax_scale = 1.5;
  const auto by_scale = attention_forward_tiled<double>(s, {2, 3}, cs(q), cs(k), cs(v));
  EXPECT_LT(max_rel_error(by_scale.out, by_scaled_q.out), 1e-12);
  EXPECT_LT(max_rel_error(by_scale.lse, by_scaled_q.lse), 1e-12);
}

TEST(RefAttentionFlops, MatchesDocsConvention) {
  AttentionShape s = attention_shape(2, 3, 1, 128, 256, 64);
  EXPECT_DOUBLE_EQ(attention_forward_flops(s), 4.0 * 2 * 128 * 256 * 3 * 64);
  EXPECT_DOUBLE_EQ(attention_backward_flops(s), 2.5 * 4.0 * 2 * 128 * 256 * 3 * 64);
  s.causal = true;
  EXPECT_DOUBLE_EQ(attention_forward_flops(s), 2.0 * 2 * 128 * 256 * 3 * 64);
  EXPECT_DOUBLE_EQ(attention_backward_flops(s), 2.5 * 2.0 * 2 * 128 * 256 * 3 * 64);
  // GQA does not change the FLOPs (every query head still does its own matmuls).
  s.kv_heads = 3;
  EXPECT_DOUBLE_EQ(attention_forward_flops(s), 2.0 * 2 * 128 * 256 * 3 * 64);
}

TEST(RefAttentionErrors, InvalidShapesThrow) {
  const AttentionShape good = attention_shape(1, 4, 2, 3, 3, 2);
  const auto q = random_values<float>(good.q_elements(), 81);
  const auto k = random_values<float>(good.kv_elements(), 82);
  const auto v = random_values<float>(good.kv_elements(), 83);
  const auto lse = random_values<float>(good.lse_elements(), 84);
  EXPECT_NO_THROW(attention_forward_naive<float>(good, cs(q), cs(k), cs(v)));

  auto bad = [&](auto mutate) {
    AttentionShape s = good;
    mutate(s);
    EXPECT_THROW(attention_forward_naive<float>(s, cs(q), cs(k), cs(v)), Error);
    EXPECT_THROW(attention_forward_tiled<float>(s, {}, cs(q), cs(k), cs(v)), Error);
    EXPECT_THROW(attention_backward_naive<float>(s, cs(q), cs(k), cs(v), cs(q), cs(q)), Error);
    EXPECT_THROW(attention_backward_tiled<float>(s, {}, cs(q), cs(k), cs(v), cs(q), cs(lse), cs(q)), Error);
  };
  bad([](AttentionShape& s) { s.kv_heads = 3; });        // does not divide heads
  bad([](AttentionShape& s) { s.kv_heads = 0; });
  bad([](AttentionShape& s) { s.heads = -4; });
  bad([](AttentionShape& s) { s.seq_q = 0; });
  bad([](AttentionShape& s) { s.head_dim = 0; });
  bad([](AttentionShape& s) { s.batch = 0; });
  bad([](AttentionShape& s) { s.seq_kv = 4; });          // spans too short for the shape
  bad([](AttentionShape& s) { s.softmax_scale = -1.0; });
  bad([](AttentionShape& s) { s.softmax_scale = NAN; });
  bad([](AttentionShape& s) {                             // causal with more queries than keys
    s.causal = true;
    s.seq_kv = 2;
  });
  bad([](AttentionShape& s) { s.batch = int64_t{1} << 62; });  // element count overflows

  EXPECT_THROW(attention_forward_tiled<float>(good, {0, 16}, cs(q), cs(k), cs(v)), Error);
  EXPECT_THROW(attention_forward_tiled<float>(good, {16, -1}, cs(q), cs(k), cs(v)), Error);
  EXPECT_THROW(attention_backward_tiled<float>(good, {0, 1}, cs(q), cs(k), cs(v), cs(q), cs(lse), cs(q)), Error);
  // Wrong LSE and O sizes.
  EXPECT_THROW(attention_backward_tiled<float>(good, {}, cs(q), cs(k), cs(v), cs(q), cs(q), cs(q)), Error);
  EXPECT_THROW(attention_backward_naive<float>(good, cs(q), cs(k), cs(v), cs(k), cs(q)), Error);
  EXPECT_THROW(attention_forward_flops(attention_shape(1, 3, 2, 1, 1, 1)), Error);
}

}  // namespace
}  // namespace lacuna::kernels
