#include "kernels/ref_activations.h"

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

}  // namespace

TEST(RefGelu, ClosedForms) {
  for (auto kind : {ref::GeluKind::kTanh, ref::GeluKind::kErf}) {
    const std::vector<double> x{0.0, 1.0, -1.0, 30.0, -30.0};
    std::vector<double> y(x.size()), dx(x.size());
    ref::gelu_forward<double>(x, kind, y);
    EXPECT_EQ(y[0], 0.0);
    EXPECT_NEAR(y[3], 30.0, 1e-12);  // gelu(x) → x for large x
    EXPECT_NEAR(y[4], 0.0, 1e-12);   // and → 0 for very negative x
    EXPECT_NEAR(y[1] - y[2], 1.0, 1e-12);  // gelu(x) − gelu(−x) = x (Φ(x) + Φ(−x) = 1; tanh is odd)
    ref::gelu_backward<double>(x, std::vector<double>(x.size(), 1.0), kind, dx);
    EXPECT_NEAR(dx[0], 0.5, 1e-15);  // gelu'(0) = Φ(0) = 1/2
  }
  // Exact values at 1: Φ(1) = 0.8413447460685429; tanh form ≈ 0.8411919906082768.
  std::vector<double> y(1);
  ref::gelu_forward<double>(std::vector<double>{1.0}, ref::GeluKind::kErf, y);
  EXPECT_NEAR(y[0], 0.8413447460685429, 1e-15);
  ref::gelu_forward<double>(std::vector<double>{1.0}, ref::GeluKind::kTanh, y);
  EXPECT_NEAR(y[0], 0.8411919906082768, 1e-12);
}

TEST(RefGelu, BackwardMatchesFiniteDifferences) {
  for (auto kind : {ref::GeluKind::kTanh, ref::GeluKind::kErf}) {
    auto x = random_vec(40, 1);
    const auto dy = random_vec(x.size(), 2);
    std::vector<double> y(x.size()), dx(x.size());
    const auto loss = [&] {
      ref::gelu_forward<double>(x, kind, y);
      return dot(dy, y);
    };
    ref::gelu_backward<double>(x, dy, kind, dx);
    EXPECT_LT(max_rel_error(dx, numeric_grad(x, loss)), 1e-5);
  }
}

TEST(RefSwiGlu, GateIsTheFirstHalf) {
  // Row [gate | up] = [g0 g1 | u0 u1]: y_j = silu(g_j)·u_j.
  const std::vector<double> x{2.0, -1.0, 3.0, 0.5};
  std::vector<double> y(2);
  ref::swiglu_forward<double>(x, 1, 2, y);
  const auto silu = [](double z) { return z / (1.0 + std::exp(-z)); };
  EXPECT_NEAR(y[0], silu(2.0) * 3.0, 1e-15);
  EXPECT_NEAR(y[1], silu(-1.0) * 0.5, 1e-15);
  // Zero gate → zero output whatever up is (silu(0) = 0).
  ref::swiglu_forward<double>(std::vector<double>{0.0, 0.0, 7.0, -7.0}, 1, 2, y);
  EXPECT_EQ(y[0], 0.0);
  EXPECT_EQ(y[1], 0.0);
}

TEST(RefSwiGlu, BackwardMatchesFiniteDifferences) {
  const std::int64_t t = 3, f = 5;
  auto x = random_vec(t * 2 * f, 3);
  const auto dy = random_vec(t * f, 4);
  std::vector<double> y(t * f), dx(x.size());
  const auto loss = [&] {
    ref::swiglu_forward<double>(x, t, f, y);
    return dot(dy, y);
  };
  ref::swiglu_backward<double>(x, dy, t, f, dx);
  EXPECT_LT(max_rel_error(dx, numeric_grad(x, loss)), 1e-5);
}

TEST(RefActivations, FloatStorageMatchesDouble) {
  const auto xd = random_vec(64, 5);
  const std::vector<float> xf(xd.begin(), xd.end());
  const std::vector<double> xr(xf.begin(), xf.end());
  std::vector<float> yf(32);
  std::vector<double> yd(32);
  ref::swiglu_forward<float>(xf, 4, 8, yf);
  ref::swiglu_forward<double>(xr, 4, 8, yd);
  for (std::size_t i = 0; i < yf.size(); ++i) EXPECT_NEAR(yf[i], yd[i], 1e-7 * std::max(1.0, std::abs(yd[i])));
}

TEST(RefResidualAdd, AddsAndAllowsInPlace) {
  std::vector<float> a{1.0f, -2.0f, 3.5f}, b{0.5f, 2.0f, -1.0f};
  std::vector<float> out(3);
  ref::residual_add<float>(a, b, out);
  EXPECT_EQ(out, (std::vector<float>{1.5f, 0.0f, 2.5f}));
  ref::residual_add<float>(a, b, a);  // in place into the residual stream
  EXPECT_EQ(a, out);
}

TEST(RefActivations, WrongSizesThrow) {
  std::vector<float> x(10), y(4), dx(10);
  EXPECT_THROW(ref::gelu_forward<float>(x, ref::GeluKind::kTanh, y), lacuna::Error);
  EXPECT_THROW(ref::gelu_backward<float>(x, y, ref::GeluKind::kErf, dx), lacuna::Error);
  EXPECT_THROW(ref::swiglu_forward<float>(x, 2, 3, y), lacuna::Error);  // x must be t·2f = 12
  EXPECT_THROW(ref::swiglu_forward<float>(x, 0, 5, y), lacuna::Error);
  EXPECT_THROW(ref::swiglu_backward<float>(x, y, 1, 5, std::span<float>(dx).first(9)), lacuna::Error);
  EXPECT_THROW(ref::residual_add<float>(x, y, dx), lacuna::Error);
}
