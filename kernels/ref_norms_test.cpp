#include "kernels/ref_norms.h"

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

constexpr ref::NormShape kShape{5, 7};
constexpr double kEps = 1e-5;

}  // namespace

TEST(RefLayerNorm, ConstantRowGivesBeta) {
  // x − mean = 0 in every element: y = beta exactly, rstd = 1/sqrt(eps).
  const std::vector<float> x(8, 3.25f), gamma(4, 2.0f), beta{0.5f, -1.0f, 2.0f, 0.0f};
  std::vector<float> y(8), mean(2), rstd(2);
  ref::layernorm_forward<float>(x, gamma, beta, {2, 4}, 1e-5, y, mean, rstd);
  for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(y[i], beta[i % 4]);
  EXPECT_FLOAT_EQ(mean[0], 3.25f);
  EXPECT_NEAR(rstd[1], 1.0 / std::sqrt(1e-5), 1e-2);
}

TEST(RefLayerNorm, NormalisedRowsHaveMeanZeroVarianceOne) {
  const auto x = random_vec(kShape.t * kShape.h, 1);
  const std::vector<double> gamma(kShape.h, 1.0), beta(kShape.h, 0.0);
  std::vector<double> y(x.size()), mean(kShape.t), rstd(kShape.t);
  ref::layernorm_forward<double>(x, gamma, beta, kShape, 0.0, y, mean, rstd);
  for (std::int64_t r = 0; r < kShape.t; ++r) {
    double m = 0.0, v = 0.0;
    for (std::int64_t j = 0; j < kShape.h; ++j) m += y[r * kShape.h + j];
    m /= kShape.h;
    for (std::int64_t j = 0; j < kShape.h; ++j) v += (y[r * kShape.h + j] - m) * (y[r * kShape.h + j] - m);
    EXPECT_NEAR(m, 0.0, 1e-12);
    EXPECT_NEAR(v / kShape.h, 1.0, 1e-12);
  }
}

TEST(RefLayerNorm, BackwardMatchesFiniteDifferences) {
  auto x = random_vec(kShape.t * kShape.h, 2), gamma = random_vec(kShape.h, 3), beta = random_vec(kShape.h, 4);
  const auto dy = random_vec(x.size(), 5);
  std::vector<double> y(x.size()), mean(kShape.t), rstd(kShape.t);
  // L = Σ dy·y, so dL/dy = dy.
  const auto loss = [&] {
    ref::layernorm_forward<double>(x, gamma, beta, kShape, kEps, y, mean, rstd);
    return dot(dy, y);
  };
  loss();
  std::vector<double> dx(x.size()), dgamma(kShape.h), dbeta(kShape.h);
  ref::layernorm_backward<double>(x, gamma, dy, mean, rstd, kShape, dx, dgamma, dbeta);
  EXPECT_LT(max_rel_error(dx, numeric_grad(x, loss)), 1e-5);
  EXPECT_LT(max_rel_error(dgamma, numeric_grad(gamma, loss)), 1e-5);
  EXPECT_LT(max_rel_error(dbeta, numeric_grad(beta, loss)), 1e-5);
}

TEST(RefRmsNorm, ClosedFormOfAConstantRow) {
  // rms of a row of c is |c|: y = gamma·sign(c) (eps = 0).
  const std::vector<float> x{-2.0f, -2.0f, -2.0f}, gamma{1.0f, 0.5f, 3.0f};
  std::vector<float> y(3), rstd(1);
  ref::rmsnorm_forward<float>(x, gamma, {1, 3}, 0.0, y, rstd);
  EXPECT_FLOAT_EQ(rstd[0], 0.5f);
  EXPECT_FLOAT_EQ(y[0], -1.0f);
  EXPECT_FLOAT_EQ(y[1], -0.5f);
  EXPECT_FLOAT_EQ(y[2], -3.0f);
}

TEST(RefRmsNorm, OutputHasUnitRootMeanSquare) {
  const auto x = random_vec(kShape.t * kShape.h, 6);
  const std::vector<double> gamma(kShape.h, 1.0);
  std::vector<double> y(x.size()), rstd(kShape.t);
  ref::rmsnorm_forward<double>(x, gamma, kShape, 0.0, y, rstd);
  for (std::int64_t r = 0; r < kShape.t; ++r) {
    double sq = 0.0;
    for (std::int64_t j = 0; j < kShape.h; ++j) sq += y[r * kShape.h + j] * y[r * kShape.h + j];
    EXPECT_NEAR(sq / kShape.h, 1.0, 1e-12);
  }
}

TEST(RefRmsNorm, BackwardMatchesFiniteDifferences) {
  auto x = random_vec(kShape.t * kShape.h, 7), gamma = random_vec(kShape.h, 8);
  const auto dy = random_vec(x.size(), 9);
  std::vector<double> y(x.size()), rstd(kShape.t);
  const auto loss = [&] {
    ref::rmsnorm_forward<double>(x, gamma, kShape, kEps, y, rstd);
    return dot(dy, y);
  };
  loss();
  std::vector<double> dx(x.size()), dgamma(kShape.h);
  ref::rmsnorm_backward<double>(x, gamma, dy, rstd, kShape, dx, dgamma);
  EXPECT_LT(max_rel_error(dx, numeric_grad(x, loss)), 1e-5);
  EXPECT_LT(max_rel_error(dgamma, numeric_grad(gamma, loss)), 1e-5);
}

TEST(RefNorms, FloatStorageMatchesDouble) {
  // The float instantiation (the GPU kernels' reference) accumulates in double:
  // its only errors are float rounding of inputs and outputs.
  const auto xd = random_vec(kShape.t * kShape.h, 10), gd = random_vec(kShape.h, 11), bd = random_vec(kShape.h, 12);
  const std::vector<float> xf(xd.begin(), xd.end()), gf(gd.begin(), gd.end()), bf(bd.begin(), bd.end());
  const std::vector<double> xr(xf.begin(), xf.end()), gr(gf.begin(), gf.end()), br(bf.begin(), bf.end());
  std::vector<float> yf(xf.size()), mf(kShape.t), rf(kShape.t);
  std::vector<double> yd(xf.size()), md(kShape.t), rd(kShape.t);
  ref::layernorm_forward<float>(xf, gf, bf, kShape, kEps, yf, mf, rf);
  ref::layernorm_forward<double>(xr, gr, br, kShape, kEps, yd, md, rd);
  for (std::size_t i = 0; i < yf.size(); ++i) EXPECT_NEAR(yf[i], yd[i], 1e-6 * std::max(1.0, std::abs(yd[i])));
}

TEST(RefNorms, WrongSizesThrow) {
  std::vector<float> x(6), g(3), b(3), y(6), m(2), r(2);
  EXPECT_THROW(ref::layernorm_forward<float>(x, g, b, {2, 4}, kEps, y, m, r), lacuna::Error);
  EXPECT_THROW(ref::layernorm_forward<float>(x, g, b, {0, 3}, kEps, y, m, r), lacuna::Error);
  EXPECT_THROW(ref::layernorm_forward<float>(x, g, b, {2, 3}, -1.0, y, m, r), lacuna::Error);
  EXPECT_THROW(ref::rmsnorm_forward<float>(x, g, {2, 3}, kEps, y, std::span<float>(r).first(1)), lacuna::Error);
  std::vector<float> dx(5), dg(3);
  EXPECT_THROW(ref::rmsnorm_backward<float>(x, g, y, r, {2, 3}, dx, dg), lacuna::Error);
  try {
    ref::layernorm_forward<float>(x, g, b, {3, 3}, kEps, y, m, r);
    FAIL() << "no error";
  } catch (const lacuna::Error& e) {
    EXPECT_NE(std::string(e.what()).find("x has 6 elements, expected 9"), std::string::npos) << e.what();
  }
}
