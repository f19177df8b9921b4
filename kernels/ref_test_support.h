// Shared by the CPU reference kernels' tests: inputs away from zero, central
// finite differences and an elementwise relative error with a floor.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

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

}  // namespace lacuna::kernels::ref::testing
