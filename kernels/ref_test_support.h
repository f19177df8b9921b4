// Shared by the CPU reference kernels' tests: inputs away from zero, central
// finite differences and an elementwise relative error with a floor.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kernels/ref_attention.h"

namespace lacuna::kernels::ref::testing {

// Values of magnitude in [0.5, 1.5] with random sign: away from zero, so
// relative errors of gradients mean something.
inline std::vector<double> random_vec(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> mag(0.5, 1.5);
  std::vector<double> v(n);
  for (auto& x : v) x = (rng() & 1 ? 1.0 : -1.0) * mag(rng);
  return v;
}

// Central differences of `loss` with respect to every element of `x` (in
// place, restored).
inline std::vector<double> numeric_grad(std::vector<double>& x, const std::function<double()>& loss) {
  std::vector<double> g(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double keep = x[i], step = 1e-5 * std::max(1.0, std::abs(keep));
    x[i] = keep + step;
    const double up = loss();
    x[i] = keep - step;
    const double down = loss();
    x[i] = keep;
    g[i] = (up - down) / (2 * step);
  }
  return g;
}

// max_i |a_i − b_i| / max(|b_i|, 1e-3·max|b|): elementwise relative error, with
// a floor so a gradient that is zero by chance does not divide by ~0.
inline double max_rel_error(const std::vector<double>& a, const std::vector<double>& b) {
  double scale = 0.0, worst = 0.0;
  for (double v : b) scale = std::max(scale, std::abs(v));
  for (std::size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(a[i] - b[i]) / std::max(std::abs(b[i]), 1e-3 * scale));
  return worst;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// An attention shape in one call, and a label for failure messages.
inline AttentionShape attention_shape(int64_t batch, int64_t heads, int64_t kv_heads, int64_t seq_q, int64_t seq_kv,
                                      int64_t head_dim, bool causal = false,
                                      std::optional<double> scale = std::nullopt) {
  AttentionShape s;
  s.batch = batch;
  s.heads = heads;
  s.kv_heads = kv_heads;
  s.seq_q = seq_q;
  s.seq_kv = seq_kv;
  s.head_dim = head_dim;
  s.causal = causal;
  s.softmax_scale = scale;
  return s;
}

inline std::string describe(const AttentionShape& s) {
  return "b" + std::to_string(s.batch) + " h" + std::to_string(s.heads) + " kv" + std::to_string(s.kv_heads) +
         " sq" + std::to_string(s.seq_q) + " skv" + std::to_string(s.seq_kv) + " d" + std::to_string(s.head_dim) +
         (s.causal ? " causal" : " full");
}

}  // namespace lacuna::kernels::ref::testing
