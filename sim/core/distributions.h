// Distributions sampled from counter-RNG uniforms (counter_rng.h). Each is a
// pure function of its uniforms and parameters, so a draw is as reproducible
// as its key. Closed forms used by the tests sit beside the samplers.
#pragma once

#include <algorithm>
#include <cmath>
#include <numbers>

#include "sim/core/counter_rng.h"

namespace lacuna {

// Standard normal by Box–Muller (exact in distribution; uses both uniforms).
inline double standard_normal(const UniformPair& u) {
  return std::sqrt(-2.0 * std::log(u.first)) * std::cos(2.0 * std::numbers::pi * u.second);
}

// Log-normal with mean 1 and coefficient of variation `cv` (σ/μ): ln X ~
// N(μ, s²) with s² = ln(1 + cv²), μ = −s²/2, so E[X] = 1 and the noisy
// kernel takes its deterministic time on average.
struct LogNormalMean1 {
  double mu = 0;
  double sigma = 0;
  explicit LogNormalMean1(double cv) {
    sigma = std::sqrt(std::log1p(cv * cv));
    mu = -0.5 * sigma * sigma;
  }
  double at(double z) const { return std::exp(mu + sigma * z); }
  // P(X ≤ x), for the order-statistics checks.
  double cdf(double x) const {
    if (x <= 0) return 0;
    if (sigma == 0) return x >= 1 ? 1 : 0;
    return 0.5 * std::erfc(-(std::log(x) - mu) / (sigma * std::numbers::sqrt2));
  }
};

// Exponential with the given mean, from one uniform in (0, 1).
inline double exponential(double u, double mean) { return -mean * std::log(u); }

// Pareto tail factor ≥ 1 with shape `alpha`, capped at `cap`: P(X > x) =
// x^−alpha for 1 ≤ x < cap.
inline double pareto_capped(double u, double alpha, double cap) {
  return std::min(cap, std::pow(u, -1.0 / alpha));
}

// E[max of n i.i.d. draws] = ∫₀^∞ (1 − F(x)^n) dx for a non-negative
// variable with CDF F: the order-statistics formula the variability tests
// compare simulated maxima with. Simpson's rule over [0, hi] in `steps`
// (even) intervals; `hi` must sit far in the tail (F(hi)^n ≈ 1).
template <class Cdf>
double expected_max(const Cdf& cdf, int n, double hi, int steps = 20000) {
  const double h = hi / steps;
  auto g = [&](double x) { return 1.0 - std::pow(cdf(x), n); };
  double s = g(0) + g(hi);
  for (int i = 1; i < steps; ++i) s += g(i * h) * (i % 2 == 1 ? 4 : 2);
  return s * h / 3;
}

}  // namespace lacuna
