#include "kernels/ref_cross_entropy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "kernels/ref_test_support.h"
#include "sim/core/error.h"

namespace ref = lacuna::kernels::ref;

using namespace lacuna::kernels::ref::testing;

namespace {

std::vector<std::int64_t> random_targets(std::size_t t, std::int64_t v, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int64_t> pick(0, v - 1);
  std::vector<std::int64_t> out(t);
  for (auto& x : out) x = pick(rng);
  return out;
}

constexpr ref::CeShape kCe{4, 12};  // V = 12 splits over tp = 2, 3, 4

// Runs the vocab-parallel forward and backward over `tp` in-process ranks,
// playing the all-reduces (MAX, then SUM) between the per-rank steps.
double vocab_parallel(const std::vector<double>& logits, const std::vector<std::int64_t>& targets,
                      const std::vector<double>& dloss, int tp, std::vector<double>& loss,
                      std::vector<double>& dlogits) {
  const std::int64_t v_r = kCe.v / tp;
  const auto t = static_cast<std::size_t>(kCe.t);
  const ref::CeShape local{kCe.t, v_r};
  std::vector<std::vector<double>> shards(tp, std::vector<double>(t * v_r));
  for (int r = 0; r < tp; ++r)
    for (std::size_t i = 0; i < t; ++i)
      for (std::int64_t j = 0; j < v_r; ++j) shards[r][i * v_r + j] = logits[i * kCe.v + r * v_r + j];
  std::vector<double> gmax(t, -INFINITY), gsum(t, 0.0), gtarget(t, 0.0), part(t), part2(t);
  for (int r = 0; r < tp; ++r) {
    ref::vocab_parallel_row_max<double>(shards[r], local, part);
    for (std::size_t i = 0; i < t; ++i) gmax[i] = std::max(gmax[i], part[i]);
  }
  for (int r = 0; r < tp; ++r) {
    ref::vocab_parallel_partials<double>(shards[r], targets, local, {r * v_r, kCe.v}, gmax, part, part2);
    for (std::size_t i = 0; i < t; ++i) {
      gsum[i] += part[i];
      gtarget[i] += part2[i];
    }
  }
  const double mean = ref::vocab_parallel_loss<double>(gsum, gtarget, loss);
  std::vector<double> d_r(t * v_r);
  for (int r = 0; r < tp; ++r) {
    ref::vocab_parallel_backward<double>(shards[r], targets, dloss, local, {r * v_r, kCe.v}, gmax, gsum, d_r);
    for (std::size_t i = 0; i < t; ++i)
      for (std::int64_t j = 0; j < v_r; ++j) dlogits[i * kCe.v + r * v_r + j] = d_r[i * v_r + j];
  }
  return mean;
}

}  // namespace

TEST(RefCrossEntropy, UniformLogitsGiveLogV) {
  for (std::int64_t v : {1, 2, 50257}) {
    const std::vector<float> logits(2 * v, 3.0f);
    const std::vector<std::int64_t> targets{0, v - 1};
    std::vector<float> loss(2);
    const double mean = ref::cross_entropy_forward<float>(logits, targets, {2, v}, loss);
    EXPECT_NEAR(mean, std::log(static_cast<double>(v)), 1e-6);
    EXPECT_NEAR(loss[1], std::log(static_cast<double>(v)), 1e-5);
  }
}

TEST(RefCrossEntropy, StableForHugeLogits) {
  // Shifting a row by a constant changes nothing; 1e4 would overflow exp() unshifted.
  const std::vector<double> a{0.0, 1.0, -2.0}, b{1e4, 1e4 + 1.0, 1e4 - 2.0};
  const std::vector<std::int64_t> target{1};
  std::vector<double> la(1), lb(1), da(3), db(3);
  ref::cross_entropy_forward<double>(a, target, {1, 3}, la);
  ref::cross_entropy_forward<double>(b, target, {1, 3}, lb);
  EXPECT_TRUE(std::isfinite(lb[0]));
  EXPECT_NEAR(la[0], lb[0], 1e-12);
  EXPECT_NEAR(la[0], std::log(1.0 + std::exp(-1.0) + std::exp(-3.0)), 1e-15);
  ref::cross_entropy_mean_backward<double>(b, target, {1, 3}, db);
  ref::cross_entropy_mean_backward<double>(a, target, {1, 3}, da);
  for (std::size_t j = 0; j < 3; ++j) EXPECT_NEAR(da[j], db[j], 1e-12);
}

TEST(RefCrossEntropy, GradientRowsSumToZero) {
  // Σ_j (softmax_j − onehot_j) = 0 for every token.
  const auto logits = random_vec(kCe.t * kCe.v, 1);
  const auto targets = random_targets(kCe.t, kCe.v, 2);
  std::vector<double> d(logits.size());
  ref::cross_entropy_mean_backward<double>(logits, targets, kCe, d);
  for (std::int64_t i = 0; i < kCe.t; ++i) {
    double s = 0.0;
    for (std::int64_t j = 0; j < kCe.v; ++j) s += d[i * kCe.v + j];
    EXPECT_NEAR(s, 0.0, 1e-15);
  }
}

TEST(RefCrossEntropy, BackwardMatchesFiniteDifferences) {
  auto logits = random_vec(kCe.t * kCe.v, 3);
  const auto targets = random_targets(kCe.t, kCe.v, 4);
  const auto dloss = random_vec(kCe.t, 5);  // per-token weights: L = Σ dloss_i·loss_i
  std::vector<double> loss(kCe.t), d(logits.size());
  const auto total = [&] {
    ref::cross_entropy_forward<double>(logits, targets, kCe, loss);
    double s = 0.0;
    for (std::size_t i = 0; i < loss.size(); ++i) s += dloss[i] * loss[i];
    return s;
  };
  ref::cross_entropy_backward<double>(logits, targets, dloss, kCe, d);
  EXPECT_LT(max_rel_error(d, numeric_grad(logits, total)), 1e-5);
  // The mean reduction: dL/dlogits of mean(loss).
  const auto mean = [&] { return ref::cross_entropy_forward<double>(logits, targets, kCe, loss); };
  ref::cross_entropy_mean_backward<double>(logits, targets, kCe, d);
  EXPECT_LT(max_rel_error(d, numeric_grad(logits, mean)), 1e-5);
}

TEST(RefCrossEntropy, VocabParallelEqualsUnsplit) {
  const auto logits = random_vec(kCe.t * kCe.v, 6);
  const auto targets = random_targets(kCe.t, kCe.v, 7);
  const auto dloss = random_vec(kCe.t, 8);
  std::vector<double> loss(kCe.t), d(logits.size());
  const double mean = ref::cross_entropy_forward<double>(logits, targets, kCe, loss);
  ref::cross_entropy_backward<double>(logits, targets, dloss, kCe, d);
  for (int tp : {1, 2, 3, 4}) {
    std::vector<double> loss_p(kCe.t), d_p(logits.size());
    EXPECT_NEAR(vocab_parallel(logits, targets, dloss, tp, loss_p, d_p), mean, 1e-14) << tp;
    for (std::size_t i = 0; i < loss.size(); ++i) EXPECT_NEAR(loss_p[i], loss[i], 1e-14) << tp;
    for (std::size_t i = 0; i < d.size(); ++i) EXPECT_NEAR(d_p[i], d[i], 1e-15) << tp;
  }
}

TEST(RefCrossEntropy, FloatStorageMatchesDouble) {
  const auto ld = random_vec(kCe.t * kCe.v, 9);
  const std::vector<float> lf(ld.begin(), ld.end());
  const std::vector<double> lr(lf.begin(), lf.end());
  const auto targets = random_targets(kCe.t, kCe.v, 10);
  std::vector<float> loss_f(kCe.t);
  std::vector<double> loss_d(kCe.t);
  EXPECT_NEAR(ref::cross_entropy_forward<float>(lf, targets, kCe, loss_f),
              ref::cross_entropy_forward<double>(lr, targets, kCe, loss_d), 1e-15);
  for (std::size_t i = 0; i < loss_f.size(); ++i) EXPECT_NEAR(loss_f[i], loss_d[i], 1e-7 * loss_d[i]);
}

TEST(RefCrossEntropy, InvalidInputsThrow) {
  std::vector<float> logits(6), loss(2), d(6);
  EXPECT_THROW(ref::cross_entropy_forward<float>(logits, std::vector<std::int64_t>{0, 3}, {2, 3}, loss),
               lacuna::Error);  // target 3 outside [0, 3)
  EXPECT_THROW(ref::cross_entropy_forward<float>(logits, std::vector<std::int64_t>{0, -1}, {2, 3}, loss),
               lacuna::Error);
  EXPECT_THROW(ref::cross_entropy_forward<float>(logits, std::vector<std::int64_t>{0}, {2, 3}, loss),
               lacuna::Error);  // one target for two tokens
  EXPECT_THROW(ref::cross_entropy_mean_backward<float>(logits, std::vector<std::int64_t>{0, 1}, {3, 3}, d),
               lacuna::Error);
  EXPECT_THROW(ref::cross_entropy_mean_backward<float>(logits, std::vector<std::int64_t>{}, {0, 3}, d),
               lacuna::Error);
  std::vector<double> gmax(2), se(2), tl(2);
  // A shard of 3 starting at 2 does not fit a vocabulary of 4.
  EXPECT_THROW(ref::vocab_parallel_partials<float>(logits, std::vector<std::int64_t>{0, 1}, {2, 3}, {2, 4}, gmax,
                                                   se, tl),
               lacuna::Error);
  try {
    ref::cross_entropy_forward<float>(logits, std::vector<std::int64_t>{0, 7}, {2, 3}, loss);
    FAIL() << "no error";
  } catch (const lacuna::Error& e) {
    EXPECT_NE(std::string(e.what()).find("target[1] = 7 is outside the vocabulary [0, 3)"), std::string::npos)
        << e.what();
  }
}
