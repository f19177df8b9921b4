#include "kernels/ref_gemm.h"

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

std::vector<double> transpose(const std::vector<double>& a, std::size_t rows, std::size_t cols) {
  std::vector<double> t(a.size());
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) t[c * rows + r] = a[r * cols + c];
  return t;
}

constexpr ref::LinearShape kLin{6, 8, 12};  // t, in, out: divisible by tp = 2 and 4

}  // namespace

TEST(RefGemm, HandComputedProduct) {
  // [1 2; 3 4]·[5 6; 7 8] = [19 22; 43 50].
  const std::vector<float> a{1, 2, 3, 4}, b{5, 6, 7, 8};
  std::vector<float> c(4);
  ref::gemm<float>(a, b, {2, 2, 2}, c);
  EXPECT_EQ(c, (std::vector<float>{19, 22, 43, 50}));
  // A [2,3]·B [3,1], non-square.
  ref::gemm<float>(std::vector<float>{1, 0, -1, 2, 1, 0}, std::vector<float>{3, 4, 5}, {2, 1, 3},
                   std::span<float>(c).first(2));
  EXPECT_EQ(c[0], -2.0f);
  EXPECT_EQ(c[1], 10.0f);
}

TEST(RefGemm, TransposeFlagsMatchExplicitTransposes) {
  const std::size_t m = 4, n = 5, k = 3;
  const auto a = random_vec(m * k, 1), b = random_vec(k * n, 2);
  std::vector<double> want(m * n), got(m * n);
  ref::gemm<double>(a, b, {m, n, k}, want);
  const auto at = transpose(a, m, k), bt = transpose(b, k, n);
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      ref::gemm<double>(ta ? at : a, tb ? bt : b, {m, n, k, ta, tb}, got);
      for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-14) << ta << tb << i;
    }
}

TEST(RefLinear, DgradAndWgradMatchFiniteDifferences) {
  auto x = random_vec(kLin.t * kLin.in, 3), w = random_vec(kLin.in * kLin.out, 4);
  const auto dy = random_vec(kLin.t * kLin.out, 5);
  std::vector<double> y(dy.size());
  const auto loss = [&] {
    ref::linear_forward<double>(x, w, kLin, y);
    double s = 0.0;
    for (std::size_t i = 0; i < y.size(); ++i) s += dy[i] * y[i];
    return s;
  };
  std::vector<double> dx(x.size()), dw(w.size());
  ref::linear_dgrad<double>(dy, w, kLin, dx);
  ref::linear_wgrad<double>(x, dy, kLin, dw);
  EXPECT_LT(max_rel_error(dx, numeric_grad(x, loss)), 1e-5);
  EXPECT_LT(max_rel_error(dw, numeric_grad(w, loss)), 1e-5);
}

TEST(RefLinear, ColumnParallelShardsConcatenateToTheProduct) {
  const auto x = random_vec(kLin.t * kLin.in, 6), w = random_vec(kLin.in * kLin.out, 7);
  std::vector<double> y(kLin.t * kLin.out);
  ref::linear_forward<double>(x, w, kLin, y);
  for (int tp : {1, 2, 4}) {
    const std::int64_t out_r = kLin.out / tp;
    std::vector<double> y_r(kLin.t * out_r);
    for (int rank = 0; rank < tp; ++rank) {
      ref::column_parallel_forward<double>(x, w, kLin, tp, rank, y_r);
      for (std::int64_t i = 0; i < kLin.t; ++i)
        for (std::int64_t j = 0; j < out_r; ++j)
          EXPECT_NEAR(y_r[i * out_r + j], y[i * kLin.out + rank * out_r + j], 1e-13);
    }
  }
}

TEST(RefLinear, RowParallelPartialsSumToTheProduct) {
  const auto x = random_vec(kLin.t * kLin.in, 8), w = random_vec(kLin.in * kLin.out, 9);
  std::vector<double> y(kLin.t * kLin.out);
  ref::linear_forward<double>(x, w, kLin, y);
  for (int tp : {1, 2, 4}) {
    const std::int64_t in_r = kLin.in / tp;
    std::vector<double> sum(y.size(), 0.0), x_r(kLin.t * in_r), partial(y.size());
    for (int rank = 0; rank < tp; ++rank) {
      // The rank's input is its column shard of X (the column-parallel layer's output).
      ref::shard_columns<double>(x, kLin.t, kLin.in, tp, rank, x_r);
      ref::row_parallel_forward<double>(x_r, w, kLin, tp, rank, partial);
      for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += partial[i];  // the all-reduce
    }
    for (std::size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(sum[i], y[i], 1e-13) << tp;
  }
}

TEST(RefLinear, ColumnParallelBackwardShardsSumAndConcatenate) {
  // Column-parallel backward: dX is the sum of the ranks' dY_r·W_rᵀ (the
  // all-reduce of the dgrad); dW is the concatenation of the ranks' X ᵀ·dY_r.
  const int tp = 4;
  const std::int64_t out_r = kLin.out / tp;
  const auto x = random_vec(kLin.t * kLin.in, 10), w = random_vec(kLin.in * kLin.out, 11),
             dy = random_vec(kLin.t * kLin.out, 12);
  std::vector<double> dx(x.size()), dw(w.size());
  ref::linear_dgrad<double>(dy, w, kLin, dx);
  ref::linear_wgrad<double>(x, dy, kLin, dw);
  std::vector<double> dx_sum(x.size(), 0.0), w_r(kLin.in * out_r), dy_r(kLin.t * out_r), dx_r(x.size()),
      dw_r(w_r.size());
  const ref::LinearShape local{kLin.t, kLin.in, out_r};
  for (int rank = 0; rank < tp; ++rank) {
    ref::shard_columns<double>(w, kLin.in, kLin.out, tp, rank, w_r);
    ref::shard_columns<double>(dy, kLin.t, kLin.out, tp, rank, dy_r);
    ref::linear_dgrad<double>(dy_r, w_r, local, dx_r);
    for (std::size_t i = 0; i < dx.size(); ++i) dx_sum[i] += dx_r[i];
    ref::linear_wgrad<double>(x, dy_r, local, dw_r);
    std::vector<double> want(dw_r.size());
    ref::shard_columns<double>(dw, kLin.in, kLin.out, tp, rank, want);
    for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(dw_r[i], want[i], 1e-13);
  }
  for (std::size_t i = 0; i < dx.size(); ++i) EXPECT_NEAR(dx_sum[i], dx[i], 1e-13);
}

TEST(RefGemm, FloatStorageMatchesDouble) {
  const std::size_t m = 7, n = 9, k = 64;
  const auto ad = random_vec(m * k, 13), bd = random_vec(k * n, 14);
  const std::vector<float> af(ad.begin(), ad.end()), bf(bd.begin(), bd.end());
  const std::vector<double> ar(af.begin(), af.end()), br(bf.begin(), bf.end());
  std::vector<float> cf(m * n);
  std::vector<double> cd(m * n);
  ref::gemm<float>(af, bf, {m, n, k}, cf);
  ref::gemm<double>(ar, br, {m, n, k}, cd);
  // Double accumulation: the float result is the double one rounded once.
  for (std::size_t i = 0; i < cf.size(); ++i) EXPECT_EQ(cf[i], static_cast<float>(cd[i]));
}

TEST(RefGemm, InvalidShapesThrow) {
  std::vector<float> a(6), b(6), c(4);
  EXPECT_THROW(ref::gemm<float>(a, b, {2, 2, 2}, c), lacuna::Error);  // A is 6, not 4
  EXPECT_THROW(ref::gemm<float>(a, b, {2, 2, 0}, c), lacuna::Error);
  EXPECT_THROW(ref::gemm<float>(a, b, {2, -2, 3}, c), lacuna::Error);
  EXPECT_THROW(ref::gemm<float>(a, b, {1LL << 40, 1LL << 40, 1LL << 40}, c), lacuna::Error);
  std::vector<float> w(12), y(6), x(6);
  EXPECT_THROW(ref::column_parallel_forward<float>(x, w, {3, 2, 6}, 4, 0, y), lacuna::Error);  // 6 % 4
  EXPECT_THROW(ref::column_parallel_forward<float>(x, w, {3, 2, 6}, 2, 2, y), lacuna::Error);  // rank
  EXPECT_THROW(ref::row_parallel_forward<float>(x, w, {3, 2, 6}, 0, 0, y), lacuna::Error);     // tp
  EXPECT_THROW(ref::shard_rows<float>(w, 2, 6, 2, 0, std::span<float>(y).first(5)), lacuna::Error);  // dst 1·6
}
