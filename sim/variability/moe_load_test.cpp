// The MoE load model (moe_load.h): its samplers against their closed-form
// moments, token conservation, the capacity cap, Megatron's contiguous expert
// layout, balanced routing as exact equal shares, and draws that are pure
// functions of (seed, layer, microbatch, iteration).
#include "sim/variability/moe_load.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "sim/core/counter_rng.h"
#include "sim/core/distributions.h"

namespace lacuna::variability {
namespace {

ir::MoeInfo moe_info(int32_t experts, int32_t ep, int32_t top_k, int64_t tokens, double alpha) {
  ir::MoeInfo m;
  m.set_num_experts(experts);
  m.set_ep(ep);
  m.set_expert_tp(1);
  m.set_top_k(top_k);
  m.set_tokens_per_microbatch(tokens);
  m.mutable_routing()->set_distribution(alpha > 0 ? scenario::ROUTING_DIRICHLET_MULTINOMIAL : scenario::ROUTING_BALANCED);
  m.mutable_routing()->set_dirichlet_alpha(alpha);
  return m;
}

struct Moments {
  double mean = 0;
  double var = 0;
};
Moments moments(const std::vector<double>& x) {
  Moments m;
  for (double v : x) m.mean += v;
  m.mean /= static_cast<double>(x.size());
  for (double v : x) m.var += (v - m.mean) * (v - m.mean);
  m.var /= static_cast<double>(x.size() - 1);
  return m;
}

// Gamma(a, 1) has mean a and variance a; checked for shapes below 1 (the
// boost) and above (Marsaglia–Tsang) within 5 standard errors.
TEST(MoeLoad, GammaDrawsHaveTheirClosedFormMoments) {
  for (double shape : {0.2, 0.7, 1.0, 3.5, 40.0}) {
    std::vector<double> x;
    for (uint32_t i = 0; i < 20000; ++i) x.push_back(gamma_draw(7, shape, i % 97, i % 311, i / 311, i % 5));
    const Moments m = moments(x);
    const double se_mean = std::sqrt(shape / static_cast<double>(x.size()));
    EXPECT_NEAR(m.mean, shape, 5 * se_mean) << shape;
    // The sample variance's standard error: sqrt((μ4 − σ⁴)/n), μ4 = 3a² + 6a.
    const double se_var = std::sqrt((3 * shape * shape + 6 * shape - shape * shape) / static_cast<double>(x.size()));
    EXPECT_NEAR(m.var, shape, 5 * se_var) << shape;
    for (double v : x) ASSERT_GT(v, 0);
  }
}

// Binomial(n, p): mean np, variance np(1 − p), in the inversion regime
// (np(1 − p) < 30) and the normal one; always within [0, n].
TEST(MoeLoad, BinomialDrawsHaveTheirClosedFormMoments) {
  struct Case {
    int64_t n;
    double p;
  };
  for (const Case c : {Case{20, 0.1}, Case{50, 0.9}, Case{1000, 0.01}, Case{100000, 0.3}, Case{7, 0.5}}) {
    std::vector<double> x;
    for (uint32_t i = 0; i < 20000; ++i) {
      const UniformPair u = uniform_pair(RngKey{3, RngPurpose::kMoeTokenCount, i, 0, 0, 0});
      const int64_t k = binomial_draw(c.n, c.p, u.first, standard_normal(u));
      ASSERT_GE(k, 0);
      ASSERT_LE(k, c.n);
      x.push_back(static_cast<double>(k));
    }
    const Moments m = moments(x);
    const double var = static_cast<double>(c.n) * c.p * (1 - c.p);
    EXPECT_NEAR(m.mean, static_cast<double>(c.n) * c.p, 5 * std::sqrt(var / static_cast<double>(x.size())));
    EXPECT_NEAR(m.var, var, 0.06 * var) << c.n << " " << c.p;
  }
  EXPECT_EQ(binomial_draw(10, 0, 0.5, 0), 0);
  EXPECT_EQ(binomial_draw(10, 1, 0.5, 0), 10);
  EXPECT_EQ(binomial_draw(0, 0.5, 0.5, 0), 0);
}

// Balanced routing: every expert exactly N / E, every rank factor 1, nothing
// varies.
TEST(MoeLoad, BalancedRoutingGivesExactEqualShares) {
  const MoeLoad load(moe_info(16, 4, 2, 1024, 0), 1);
  EXPECT_FALSE(load.varies());
  const std::vector<int64_t> t = load.expert_tokens(3, 1, 0);
  ASSERT_EQ(t.size(), 16u);
  for (int64_t c : t) EXPECT_EQ(c, 1024 * 2 * 4 / 16);
  for (double f : load.rank_factors(3, 1, 0)) EXPECT_EQ(f, 1.0);
  EXPECT_EQ(load.factor(2, 3, 1, 0), 1.0);
}

// Without a capacity every assignment lands somewhere: the experts' counts
// sum to N = T · ep · k, the ranks' factors to ep, and a rank's factor is its
// contiguous block of E / ep experts over T · k.
TEST(MoeLoad, TokensAreConservedAndDealtContiguously) {
  const int32_t E = 32, ep = 8, k = 4;
  const int64_t T = 2048;
  for (double alpha : {0.3, 2.0, 50.0}) {
    const MoeLoad load(moe_info(E, ep, k, T, alpha), 11);
    ASSERT_TRUE(load.varies());
    for (int32_t layer = 0; layer < 5; ++layer) {
      const std::vector<int64_t> t = load.expert_tokens(layer, 2, 1);
      EXPECT_EQ(std::accumulate(t.begin(), t.end(), int64_t{0}), T * ep * k);
      const std::vector<double> f = load.rank_factors(layer, 2, 1);
      for (int32_t r = 0; r < ep; ++r) {
        const int64_t block = std::accumulate(t.begin() + r * (E / ep), t.begin() + (r + 1) * (E / ep), int64_t{0});
        EXPECT_DOUBLE_EQ(f[static_cast<size_t>(r)], static_cast<double>(std::max<int64_t>(block, 1)) / (T * k));
        EXPECT_DOUBLE_EQ(load.factor(r, layer, 2, 1), f[static_cast<size_t>(r)]);
      }
    }
  }
}

// The Dirichlet-multinomial's variance of one expert's count, with p = 1/E:
// N p (1 − p) (N + Eα) / (1 + Eα). Over many (layer, microbatch) draws the
// sample variance of expert 0's count matches it within 10 %; the mean is N/E.
TEST(MoeLoad, ExpertCountsFollowTheDirichletMultinomial) {
  const int32_t E = 16, ep = 4, k = 2;
  const int64_t T = 512;
  const double N = static_cast<double>(T * ep * k);
  for (double alpha : {0.5, 4.0, 100.0}) {
    const MoeLoad load(moe_info(E, ep, k, T, alpha), 5);
    std::vector<double> first, last;
    for (int32_t layer = 0; layer < 100; ++layer) {
      for (int32_t mb = 0; mb < 100; ++mb) {
        const std::vector<int64_t> t = load.expert_tokens(layer, mb, 0);
        first.push_back(static_cast<double>(t.front()));
        last.push_back(static_cast<double>(t.back()));
      }
    }
    const double p = 1.0 / E;
    const double var = N * p * (1 - p) * (N + E * alpha) / (1 + E * alpha);
    for (const auto* x : {&first, &last}) {
      const Moments m = moments(*x);
      EXPECT_NEAR(m.mean, N * p, 5 * std::sqrt(var / static_cast<double>(x->size()))) << alpha;
      EXPECT_NEAR(m.var, var, 0.1 * var) << alpha;
    }
  }
}

// Draws are pure functions of (seed, layer, microbatch, iteration): the same
// coordinates give the same counts from a fresh model, and changing any one
// coordinate or the seed gives different counts.
TEST(MoeLoad, DrawsArePureFunctionsOfTheirCoordinates) {
  const ir::MoeInfo info = moe_info(64, 8, 6, 4096, 1.0);
  const MoeLoad a(info, 9);
  const MoeLoad b(info, 9);
  EXPECT_EQ(a.expert_tokens(4, 7, 2), b.expert_tokens(4, 7, 2));
  EXPECT_EQ(a.rank_factors(4, 7, 2), b.factors(4, 7, 2));
  const MoeLoad other_seed(info, 10);
  EXPECT_NE(a.expert_tokens(4, 7, 2), other_seed.expert_tokens(4, 7, 2));
  EXPECT_NE(a.expert_tokens(4, 7, 2), a.expert_tokens(5, 7, 2));
  EXPECT_NE(a.expert_tokens(4, 7, 2), a.expert_tokens(4, 8, 2));
  EXPECT_NE(a.expert_tokens(4, 7, 2), a.expert_tokens(4, 7, 3));
}

// Capacity: no expert computes more than ep · ceil(T · k / E · cf) tokens
// (Megatron's per-source capacity summed over the group), so drops only
// lower the counts; padding to capacity makes every load equal.
TEST(MoeLoad, CapacityCapsEveryExpertAndPaddingRemovesTheImbalance) {
  ir::MoeInfo info = moe_info(16, 4, 2, 1000, 0.2);
  info.set_capacity_factor(1.25);
  const MoeLoad capped(info, 3);
  const int64_t cap = 4 * static_cast<int64_t>(std::ceil(1000.0 * 2 / 16 * 1.25));
  EXPECT_EQ(capped.group_capacity_per_expert(), cap);
  info.set_capacity_factor(0);
  const MoeLoad free(info, 3);
  bool any_dropped = false;
  for (int32_t layer = 0; layer < 20; ++layer) {
    const std::vector<int64_t> c = capped.expert_tokens(layer, 0, 0);
    const std::vector<int64_t> f = free.expert_tokens(layer, 0, 0);
    for (size_t e = 0; e < c.size(); ++e) {
      EXPECT_LE(c[e], cap);
      EXPECT_EQ(c[e], std::min(f[e], cap));
      any_dropped = any_dropped || c[e] < f[e];
    }
  }
  EXPECT_TRUE(any_dropped);  // alpha 0.2 is skewed enough to hit the cap
  info.set_capacity_factor(1.25);
  info.set_pad_to_capacity(true);
  EXPECT_FALSE(MoeLoad(info, 3).varies());
}

}  // namespace
}  // namespace lacuna::variability
