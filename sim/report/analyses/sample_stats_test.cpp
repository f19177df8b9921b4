#include "sim/report/analyses/sample_stats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace lacuna::report {
namespace {

TEST(SampleStats, NearestRankIsIntegerCeilOfPK) {
  EXPECT_EQ(nearest_rank(50, 10), 5);
  EXPECT_EQ(nearest_rank(90, 10), 9);  // 0.9 · 10 in floating point is 9.000000000000002
  EXPECT_EQ(nearest_rank(99, 10), 10);
  EXPECT_EQ(nearest_rank(90, 100), 90);
  EXPECT_EQ(nearest_rank(99, 100), 99);
  EXPECT_EQ(nearest_rank(50, 1), 1);
  EXPECT_EQ(nearest_rank(50, 7), 4);
  EXPECT_EQ(nearest_rank(0, 7), 1);
}

TEST(SampleStats, BinomialCdfClosedForm) {
  EXPECT_DOUBLE_EQ(binomial_cdf(-1, 3, 0.5), 0.0);
  EXPECT_NEAR(binomial_cdf(0, 3, 0.5), 1.0 / 8, 1e-15);
  EXPECT_NEAR(binomial_cdf(1, 3, 0.5), 4.0 / 8, 1e-15);
  EXPECT_NEAR(binomial_cdf(2, 3, 0.5), 7.0 / 8, 1e-15);
  EXPECT_DOUBLE_EQ(binomial_cdf(3, 3, 0.5), 1.0);
  EXPECT_NEAR(binomial_cdf(0, 10, 0.9), std::pow(0.1, 10), 1e-20);
}

TEST(SampleStats, QuantileRankIntervalClosedForm) {
  // p50 of 6: F(0) = 1/64 <= 0.025 < F(1) = 7/64, so l = 1; F(4) = 57/64 <
  // 0.975 <= F(5) = 63/64, so u = 6; coverage 62/64.
  const RankInterval r = quantile_rank_interval(50, 6);
  EXPECT_EQ(r.low, 1);
  EXPECT_EQ(r.high, 6);
  EXPECT_NEAR(r.coverage, 62.0 / 64, 1e-12);
  // Too few samples: 0.5^5 > 0.025, 0.9^35 > 0.025, 0.99^367 > 0.025.
  EXPECT_EQ(quantile_rank_interval(50, 5).low, 0);
  EXPECT_GT(quantile_rank_interval(90, 36).low, 0);
  EXPECT_EQ(quantile_rank_interval(90, 35).low, 0);
  EXPECT_GT(quantile_rank_interval(99, 368).low, 0);
  EXPECT_EQ(quantile_rank_interval(99, 367).low, 0);
  // Every interval found covers at least 95 % and brackets the point estimate.
  for (int32_t k : {6, 10, 37, 100, 400, 1000}) {
    for (int32_t p : {50, 90, 99}) {
      const RankInterval q = quantile_rank_interval(p, k);
      if (q.low == 0) continue;
      EXPECT_GE(q.coverage, 0.95) << p << " " << k;
      EXPECT_LE(q.low, nearest_rank(p, k));
      EXPECT_GE(q.high, nearest_rank(p, k));
    }
  }
}

TEST(SampleStats, StudentTCriticalValues) {
  EXPECT_NEAR(student_t_critical(0.95, 1), 12.7062, 1e-4);
  EXPECT_NEAR(student_t_critical(0.95, 10), 2.2281, 1e-4);
  EXPECT_NEAR(student_t_critical(0.95, 100000), 1.95996, 1e-4);
}

TEST(SampleStats, DescribeOneToHundred) {
  std::vector<double> v(100);
  std::iota(v.begin(), v.end(), 1.0);
  std::shuffle(v.begin(), v.end(), std::mt19937_64(7));
  const Distribution d = describe(v);
  EXPECT_EQ(d.count, 100);
  EXPECT_DOUBLE_EQ(d.mean, 50.5);
  EXPECT_NEAR(d.stddev, std::sqrt(100.0 * 101.0 / 12.0), 1e-12);  // sample sd of 1..n
  EXPECT_EQ(d.min, 1.0);
  EXPECT_EQ(d.max, 100.0);
  ASSERT_TRUE(d.mean_ci);
  const double half = student_t_critical(0.95, 99) * d.stddev / 10.0;
  EXPECT_NEAR(d.mean_ci->low, 50.5 - half, 1e-12);
  EXPECT_NEAR(d.mean_ci->high, 50.5 + half, 1e-12);
  ASSERT_EQ(d.quantiles.size(), 3u);
  EXPECT_EQ(d.quantiles[0].value, 50.0);
  EXPECT_EQ(d.quantiles[1].value, 90.0);
  EXPECT_EQ(d.quantiles[2].value, 99.0);
  // With the values equal to their ranks, the interval is the ranks.
  for (const Quantile& q : {d.quantiles[0], d.quantiles[1]}) {
    ASSERT_TRUE(q.ci);
    EXPECT_EQ(q.ci->low, q.ci_low_rank);
    EXPECT_EQ(q.ci->high, q.ci_high_rank);
  }
  EXPECT_FALSE(d.quantiles[2].ci) << "p99 of 100 samples has no two-sided 95 % interval";
}

TEST(SampleStats, IdenticalSamplesHaveExactlyTheirValueAsMean) {
  // Σ x / K of K equal values is not always the value (0.1 × 10 / 10 and
  // 0.43517514951375175 × 5 / 5 are each 1 ulp off); the mean and its
  // interval must be the value exactly, as the report claims for them.
  for (const auto& [v, k] : {std::pair{0.1, 10}, std::pair{0.43517514951375175, 5}, std::pair{1.957, 64}}) {
    const Distribution d = describe(std::vector<double>(static_cast<size_t>(k), v), {50, 90, 99}, 0.95);
    EXPECT_EQ(d.mean, v) << k;
    EXPECT_EQ(d.stddev, 0.0);
    ASSERT_TRUE(d.mean_ci);
    EXPECT_EQ(d.mean_ci->low, v);
    EXPECT_EQ(d.mean_ci->high, v);
  }
  // And a mean stays inside [min, max].
  const Distribution d = describe({1e16, 1e16 + 2, 1e16 + 2}, {50}, 0.95);
  EXPECT_GE(d.mean, d.min);
  EXPECT_LE(d.mean, d.max);
}

TEST(SampleStats, OneSampleHasNoMeanInterval) {
  const Distribution d = describe({3.0});
  EXPECT_EQ(d.mean, 3.0);
  EXPECT_EQ(d.stddev, 0.0);
  EXPECT_FALSE(d.mean_ci);
  EXPECT_EQ(d.quantiles[2].value, 3.0);
}

// Coverage: over many experiments of K samples from a known distribution
// (fixed seed), the intervals contain the true value about as often as
// promised: the t interval for normal samples 95 %, each quantile interval
// exactly its computed coverage (distribution-free, here an exponential).
// 2000 experiments: a binomial standard deviation of 0.49 %; bounds at 4 sd.
TEST(SampleStats, IntervalsCoverTheTruthAsOftenAsPromised) {
  std::mt19937_64 rng(20261201);
  auto uniform = [&] { return (static_cast<double>(rng() >> 11) + 0.5) * 0x1.0p-53; };
  auto normal = [&] {  // Box–Muller
    return std::sqrt(-2.0 * std::log(uniform())) * std::cos(2.0 * M_PI * uniform());
  };
  constexpr int kExperiments = 2000;
  constexpr int32_t kSamples = 40;
  int mean_hits = 0;
  int p50_hits = 0;
  int p90_hits = 0;
  const double true_p50 = std::log(2.0);   // exponential(1)
  const double true_p90 = std::log(10.0);
  for (int e = 0; e < kExperiments; ++e) {
    std::vector<double> n(kSamples), x(kSamples);
    for (double& v : n) v = 3.0 + 2.0 * normal();
    for (double& v : x) v = -std::log(uniform());
    const Distribution dn = describe(n);
    if (dn.mean_ci->low <= 3.0 && 3.0 <= dn.mean_ci->high) ++mean_hits;
    const Distribution dx = describe(x);
    if (dx.quantiles[0].ci->low <= true_p50 && true_p50 <= dx.quantiles[0].ci->high) ++p50_hits;
    if (dx.quantiles[1].ci->low <= true_p90 && true_p90 <= dx.quantiles[1].ci->high) ++p90_hits;
  }
  const double sd = std::sqrt(0.95 * 0.05 / kExperiments);
  EXPECT_NEAR(mean_hits / double(kExperiments), 0.95, 4 * sd);
  const double c50 = quantile_rank_interval(50, kSamples).coverage;
  const double c90 = quantile_rank_interval(90, kSamples).coverage;
  EXPECT_NEAR(p50_hits / double(kExperiments), c50, 4 * std::sqrt(c50 * (1 - c50) / kExperiments));
  EXPECT_NEAR(p90_hits / double(kExperiments), c90, 4 * std::sqrt(c90 * (1 - c90) / kExperiments));
}

}  // namespace
}  // namespace lacuna::report
