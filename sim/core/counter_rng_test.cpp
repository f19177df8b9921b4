#include "sim/core/counter_rng.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

#include "sim/core/distributions.h"

namespace lacuna {
namespace {

// Random123's tests/kat_vectors, the three "philox4x32 10" lines.
TEST(CounterRng, Philox4x32_10MatchesRandom123KnownAnswers) {
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (std::array<uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (std::array<uint32_t, 4>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (std::array<uint32_t, 4>{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
  static_assert(philox4x32_10({0, 0, 0, 0}, {0, 0})[0] == 0x6627e8d5, "usable at compile time");
}

TEST(CounterRng, SameKeySameValueAndEveryCoordinateMatters) {
  const RngKey base{42, RngPurpose::kKernelNoise, 7, 3, 11, 0};
  EXPECT_EQ(random_bits(base), random_bits(base));
  std::set<std::array<uint32_t, 4>> seen{random_bits(base)};
  for (int field = 0; field < 6; ++field) {
    RngKey k = base;
    switch (field) {
      case 0: k.seed = 43; break;
      case 1: k.purpose = RngPurpose::kLaunchSkew; break;
      case 2: k.a = 8; break;
      case 3: k.b = 4; break;
      case 4: k.c = 12; break;
      case 5: k.d = 1; break;
    }
    EXPECT_TRUE(seen.insert(random_bits(k)).second) << "field " << field << " does not change the draw";
  }
  // The seed's high word is part of the key too.
  RngKey hi = base;
  hi.seed = base.seed | (uint64_t{1} << 40);
  EXPECT_NE(random_bits(hi), random_bits(base));
}

TEST(CounterRng, UniformsAreOpenAndUniform) {
  constexpr int kN = 200000;
  constexpr int kBins = 64;
  std::vector<int> bins(kBins, 0);
  double sum = 0, sum2 = 0;
  for (int i = 0; i < kN; ++i) {
    const double u = uniform(RngKey{1, RngPurpose::kGpuSpeed, static_cast<uint32_t>(i), 0, 0, 0});
    ASSERT_GT(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    sum2 += u * u;
    ++bins[static_cast<int>(u * kBins)];
  }
  const double mean = sum / kN;
  const double var = sum2 / kN - mean * mean;
  // Standard errors: sqrt(1/12/N) ≈ 6.5e-4 for the mean; 5 of them.
  EXPECT_NEAR(mean, 0.5, 5 * std::sqrt(1.0 / 12 / kN));
  EXPECT_NEAR(var, 1.0 / 12, 0.002);
  // χ² with 63 degrees of freedom: mean 63, sd 11.2; 120 is beyond p = 1e-6.
  double chi2 = 0;
  const double expected = static_cast<double>(kN) / kBins;
  for (int b : bins) chi2 += (b - expected) * (b - expected) / expected;
  EXPECT_LT(chi2, 120.0);
}

// Pearson's correlation of the pairs pair_at(0 .. n-1).
//
// A plain function, not a lambda: a lambda is implicitly constexpr, and with
// every argument a constant GCC 12 at -O2 tries to fold the whole call in its
// constant evaluator, 100,000 Philox blocks per call. That took 142 s of
// compile time (issue 33); as a non-constexpr function it takes none.
template <class PairAt>
double correlation(PairAt&& pair_at, int n_pairs) {
  double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
  for (int i = 0; i < n_pairs; ++i) {
    const auto [x, y] = pair_at(static_cast<uint32_t>(i));
    sx += x;
    sy += y;
    sxx += x * x;
    syy += y * y;
    sxy += x * y;
  }
  const double n = n_pairs;
  return (sxy / n - sx / n * sy / n) / std::sqrt((sxx / n - sx * sx / n / n) * (syy / n - sy * sy / n / n));
}

// Neighbouring keys (rank r and r + 1, iteration i and i + 1, and the two
// halves of one block) give uncorrelated values: |ρ| within 5 standard errors
// (1/√N) of 0.
TEST(CounterRng, NeighbouringKeysAreUncorrelated) {
  constexpr int kN = 100000;
  const double bound = 5.0 / std::sqrt(static_cast<double>(kN));
  EXPECT_LT(std::abs(correlation([](uint32_t i) {
              return std::pair{uniform(RngKey{9, RngPurpose::kKernelNoise, i, 0, 5, 0}),
                               uniform(RngKey{9, RngPurpose::kKernelNoise, i + 1, 0, 5, 0})};
            }, kN)),
            bound);
  EXPECT_LT(std::abs(correlation([](uint32_t i) {
              return std::pair{uniform(RngKey{9, RngPurpose::kKernelNoise, 3, 1, i, 0}),
                               uniform(RngKey{9, RngPurpose::kKernelNoise, 3, 1, i, 1})};
            }, kN)),
            bound);
  EXPECT_LT(std::abs(correlation([](uint32_t i) {
              const UniformPair p = uniform_pair(RngKey{9, RngPurpose::kLaunchSkew, i, 2, 0, 0});
              return std::pair{p.first, p.second};
            }, kN)),
            bound);
  EXPECT_LT(std::abs(correlation([](uint32_t i) {
              return std::pair{uniform(RngKey{9, RngPurpose::kGpuSpeed, i, 0, 0, 0}),
                               uniform(RngKey{9, RngPurpose::kStragglerHost, i, 0, 0, 0})};
            }, kN)),
            bound);
}

TEST(Distributions, LogNormalHasMeanOneAndTheRequestedCv) {
  constexpr int kN = 200000;
  for (double cv : {0.005, 0.02, 0.3}) {
    const LogNormalMean1 d(cv);
    double sum = 0, sum2 = 0;
    for (int i = 0; i < kN; ++i) {
      const double x = d.at(standard_normal(uniform_pair(RngKey{5, RngPurpose::kKernelNoise, static_cast<uint32_t>(i), 0, 0, 0})));
      sum += x;
      sum2 += x * x;
    }
    const double mean = sum / kN;
    const double sd = std::sqrt(sum2 / kN - mean * mean);
    // Standard error of the mean is cv/√N; of the sd about cv/√(2N) (more
    // for the skewed cv = 0.3): 5 of each, and 3 % on the CV.
    EXPECT_NEAR(mean, 1.0, 5 * cv / std::sqrt(static_cast<double>(kN))) << "cv " << cv;
    EXPECT_NEAR(sd / mean, cv, 0.03 * cv) << "cv " << cv;
  }
}

TEST(Distributions, ExponentialAndParetoTails) {
  constexpr int kN = 100000;
  double sum = 0;
  int above2 = 0;
  for (int i = 0; i < kN; ++i) {
    const UniformPair u = uniform_pair(RngKey{3, RngPurpose::kLaunchSkew, static_cast<uint32_t>(i), 0, 0, 0});
    sum += exponential(u.first, 26.0);
    const double p = pareto_capped(u.second, 2.0, 4.0);
    ASSERT_GE(p, 1.0);
    ASSERT_LE(p, 4.0);
    above2 += p > 2.0;
  }
  EXPECT_NEAR(sum / kN, 26.0, 5 * 26.0 / std::sqrt(static_cast<double>(kN)));
  // P(X > 2) = 2^−2 = 0.25; binomial standard error 0.0014.
  EXPECT_NEAR(static_cast<double>(above2) / kN, 0.25, 0.007);
}

// The order-statistics integral against a closed form: for the exponential
// with mean 1, E[max of n] = H_n (the n-th harmonic number).
TEST(Distributions, ExpectedMaxIntegralMatchesHarmonicNumbers) {
  for (int n : {1, 2, 8, 100, 3072}) {
    double harmonic = 0;
    for (int i = 1; i <= n; ++i) harmonic += 1.0 / i;
    const double e = expected_max([](double x) { return 1.0 - std::exp(-x); }, n, 60.0, 200000);
    EXPECT_NEAR(e, harmonic, 1e-6 * harmonic) << n;
  }
}

}  // namespace
}  // namespace lacuna
