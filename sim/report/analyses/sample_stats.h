// Statistics of Monte Carlo samples (`lacuna simulate --samples K`,
// docs/metrics.md#monte-carlo): the mean with a Student-t confidence interval
// and nearest-rank quantiles with distribution-free confidence intervals from
// order statistics. Pure functions of the sample values; no randomness.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace lacuna::report {

// A confidence interval; absent when the samples cannot give one at the level
// asked (too few samples).
struct Interval {
  double low = 0;
  double high = 0;
};

// One quantile: the nearest-rank estimate x_(ceil(p K)) (an actual sample,
// 1-based order statistic) and the order statistics (x_(l), x_(u)) that cover
// the true quantile with probability `coverage` >= the level asked, whatever
// the distribution (continuous or not: then at least that).
struct Quantile {
  int32_t percent = 0;  // p · 100: 50, 90, 99
  double value = 0;
  std::optional<Interval> ci;
  int32_t ci_low_rank = 0;  // l and u, 1-based; 0 when there is no interval
  int32_t ci_high_rank = 0;
  double coverage = 0;  // P(x_(l) <= quantile <= x_(u)) for a continuous distribution
};

struct Distribution {
  int32_t count = 0;
  double mean = 0;
  double stddev = 0;  // sample standard deviation (K - 1 in the denominator); 0 for K = 1
  double min = 0;
  double max = 0;
  // mean ± t(1 - α/2, K - 1) · s / √K; absent for K = 1. Exact for normal
  // samples, approximate (central limit) otherwise.
  std::optional<Interval> mean_ci;
  std::vector<Quantile> quantiles;  // in the order asked
};

inline constexpr double kConfidence = 0.95;

// Nearest-rank quantile: the ceil(percent · K / 100)-th smallest (1-based,
// at least the first). Integer arithmetic, so p90 of 10 samples is the 9th.
int32_t nearest_rank(int32_t percent, int32_t count);

// P(X <= j) for X ~ Binomial(n, p); 0 for j < 0, 1 for j >= n.
double binomial_cdf(int32_t j, int32_t n, double p);

// The distribution-free interval for the `percent` quantile ξ_p of `count`
// samples at `confidence` = 1 - α. B = #{samples <= ξ_p} ~ Binomial(count, p),
// and x_(l) <= ξ_p <= x_(u) exactly when l <= B <= u - 1 (continuous case), so
// its coverage is F(u - 1) - F(l - 1), F the binomial CDF. l is the largest
// with F(l - 1) <= α/2, u the smallest with F(u - 1) >= 1 - α/2: coverage
// >= 1 - α. {0, 0} when either does not exist within 1..count: a two-sided
// 95 % interval needs K >= 6 samples for p50, 36 for p90, 368 for p99.
struct RankInterval {
  int32_t low = 0;
  int32_t high = 0;
  double coverage = 0;
};
RankInterval quantile_rank_interval(int32_t percent, int32_t count, double confidence = kConfidence);

// Two-sided Student-t quantile t(1 - α/2, dof).
double student_t_critical(double confidence, int32_t dof);

// Everything above for `values` (any order; at least one).
Distribution describe(std::vector<double> values, const std::vector<int32_t>& percents = {50, 90, 99},
                      double confidence = kConfidence);

}  // namespace lacuna::report
