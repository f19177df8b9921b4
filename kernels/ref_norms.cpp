#include "kernels/ref_norms.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/ref_checks.h"
#include "sim/core/error.h"

namespace lacuna::kernels::ref {
namespace {

// Validates the shape and returns t·h; throws rather than overflow.
std::size_t checked_elements(const char* fn, NormShape s) {
  if (s.t <= 0 || s.h <= 0)
    throw Error(std::string(fn) + ": shape [t=" + std::to_string(s.t) + ", h=" + std::to_string(s.h) +
                "] must have t > 0 and h > 0");
  if (s.t > std::numeric_limits<std::int64_t>::max() / s.h)
    throw Error(std::string(fn) + ": t·h overflows");
  return static_cast<std::size_t>(s.t * s.h);
}

void check_eps(const char* fn, double eps) {
  // eps = 0 is allowed (a constant row then gives rstd = inf, as torch does);
  // a negative or NaN eps is a caller bug.
  if (!(eps >= 0.0)) throw Error(std::string(fn) + ": eps must be >= 0, got " + std::to_string(eps));
}

}  // namespace

template <typename T>
void layernorm_forward(std::span<const T> x, std::span<const T> gamma, std::span<const T> beta,
                       NormShape s, double eps, std::span<T> y, std::span<T> mean, std::span<T> rstd) {
  const char* fn = "ref::layernorm_forward";
  const std::size_t n = checked_elements(fn, s);
  const auto t = static_cast<std::size_t>(s.t), h = static_cast<std::size_t>(s.h);
  check_size(fn, "x", x.size(), n);
  check_size(fn, "gamma", gamma.size(), h);
  check_size(fn, "beta", beta.size(), h);
  check_size(fn, "y", y.size(), n);
  check_size(fn, "mean", mean.size(), t);
  check_size(fn, "rstd", rstd.size(), t);
  check_eps(fn, eps);
  for (std::size_t r = 0; r < t; ++r) {
    const auto xr = x.subspan(r * h, h);
    double sum = 0.0;
    for (T v : xr) sum += v;
    const double mu = sum / static_cast<double>(h);
    // Two-pass variance: no cancellation from E[x²] − E[x]².
    double sq = 0.0;
    for (T v : xr) sq += (v - mu) * (v - mu);
    const double rs = 1.0 / std::sqrt(sq / static_cast<double>(h) + eps);
    for (std::size_t j = 0; j < h; ++j)
      y[r * h + j] = static_cast<T>(static_cast<double>(gamma[j]) * ((xr[j] - mu) * rs) + beta[j]);
    mean[r] = static_cast<T>(mu);
    rstd[r] = static_cast<T>(rs);
  }
}

template <typename T>
void layernorm_backward(std::span<const T> x, std::span<const T> gamma, std::span<const T> dy,
                        std::span<const T> mean, std::span<const T> rstd, NormShape s, std::span<T> dx,
                        std::span<T> dgamma, std::span<T> dbeta) {
  const char* fn = "ref::layernorm_backward";
  const std::size_t n = checked_elements(fn, s);
  const auto t = static_cast<std::size_t>(s.t), h = static_cast<std::size_t>(s.h);
  check_size(fn, "x", x.size(), n);
  check_size(fn, "gamma", gamma.size(), h);
  check_size(fn, "dy", dy.size(), n);
  check_size(fn, "mean", mean.size(), t);
  check_size(fn, "rstd", rstd.size(), t);
  check_size(fn, "dx", dx.size(), n);
  check_size(fn, "dgamma", dgamma.size(), h);
  check_size(fn, "dbeta", dbeta.size(), h);
  std::vector<double> dg(h, 0.0), db(h, 0.0);
  for (std::size_t r = 0; r < t; ++r) {
    const double mu = mean[r], rs = rstd[r];
    // With xhat = (x − mu)·rstd and g = dy·gamma:
    // dx = rstd·(g − mean(g) − xhat·mean(g·xhat)).
    double mg = 0.0, mgx = 0.0;
    for (std::size_t j = 0; j < h; ++j) {
      const double xhat = (x[r * h + j] - mu) * rs;
      const double g = static_cast<double>(dy[r * h + j]) * gamma[j];
      mg += g;
      mgx += g * xhat;
      dg[j] += static_cast<double>(dy[r * h + j]) * xhat;
      db[j] += dy[r * h + j];
    }
    mg /= static_cast<double>(h);
    mgx /= static_cast<double>(h);
    for (std::size_t j = 0; j < h; ++j) {
      const double xhat = (x[r * h + j] - mu) * rs;
      const double g = static_cast<double>(dy[r * h + j]) * gamma[j];
      dx[r * h + j] = static_cast<T>(rs * (g - mg - xhat * mgx));
    }
  }
  for (std::size_t j = 0; j < h; ++j) {
    dgamma[j] = static_cast<T>(dg[j]);
    dbeta[j] = static_cast<T>(db[j]);
  }
}

template <typename T>
void rmsnorm_forward(std::span<const T> x, std::span<const T> gamma, NormShape s, double eps,
                     std::span<T> y, std::span<T> rstd) {
  const char* fn = "ref::rmsnorm_forward";
  const std::size_t n = checked_elements(fn, s);
  const auto t = static_cast<std::size_t>(s.t), h = static_cast<std::size_t>(s.h);
  check_size(fn, "x", x.size(), n);
  check_size(fn, "gamma", gamma.size(), h);
  check_size(fn, "y", y.size(), n);
  check_size(fn, "rstd", rstd.size(), t);
  check_eps(fn, eps);
  for (std::size_t r = 0; r < t; ++r) {
    double sq = 0.0;
    for (std::size_t j = 0; j < h; ++j) sq += static_cast<double>(x[r * h + j]) * x[r * h + j];
    const double rs = 1.0 / std::sqrt(sq / static_cast<double>(h) + eps);
    for (std::size_t j = 0; j < h; ++j) y[r * h + j] = static_cast<T>(static_cast<double>(gamma[j]) * x[r * h + j] * rs);
    rstd[r] = static_cast<T>(rs);
  }
}

template <typename T>
void rmsnorm_backward(std::span<const T> x, std::span<const T> gamma, std::span<const T> dy,
                      std::span<const T> rstd, NormShape s, std::span<T> dx, std::span<T> dgamma) {
  const char* fn = "ref::rmsnorm_backward";
  const std::size_t n = checked_elements(fn, s);
  const auto t = static_cast<std::size_t>(s.t), h = static_cast<std::size_t>(s.h);
  check_size(fn, "x", x.size(), n);
  check_size(fn, "gamma", gamma.size(), h);
  check_size(fn, "dy", dy.size(), n);
  check_size(fn, "rstd", rstd.size(), t);
  check_size(fn, "dx", dx.size(), n);
  check_size(fn, "dgamma", dgamma.size(), h);
  std::vector<double> dg(h, 0.0);
  for (std::size_t r = 0; r < t; ++r) {
    const double rs = rstd[r];
    // With xhat = x·rstd and g = dy·gamma: dx = rstd·(g − xhat·mean(g·xhat)).
    double mgx = 0.0;
    for (std::size_t j = 0; j < h; ++j) {
      const double xhat = x[r * h + j] * rs;
      mgx += static_cast<double>(dy[r * h + j]) * gamma[j] * xhat;
      dg[j] += static_cast<double>(dy[r * h + j]) * xhat;
    }
    mgx /= static_cast<double>(h);
    for (std::size_t j = 0; j < h; ++j) {
      const double xhat = x[r * h + j] * rs;
      dx[r * h + j] = static_cast<T>(rs * (static_cast<double>(dy[r * h + j]) * gamma[j] - xhat * mgx));
    }
  }
  for (std::size_t j = 0; j < h; ++j) dgamma[j] = static_cast<T>(dg[j]);
}

#define LACUNA_REF_NORMS(T)                                                                              \
  template void layernorm_forward<T>(std::span<const T>, std::span<const T>, std::span<const T>,          \
                                     NormShape, double, std::span<T>, std::span<T>, std::span<T>);        \
  template void layernorm_backward<T>(std::span<const T>, std::span<const T>, std::span<const T>,         \
                                      std::span<const T>, std::span<const T>, NormShape, std::span<T>,    \
                                      std::span<T>, std::span<T>);                                        \
  template void rmsnorm_forward<T>(std::span<const T>, std::span<const T>, NormShape, double,             \
                                   std::span<T>, std::span<T>);                                           \
  template void rmsnorm_backward<T>(std::span<const T>, std::span<const T>, std::span<const T>,           \
                                    std::span<const T>, NormShape, std::span<T>, std::span<T>);
LACUNA_REF_NORMS(float)
LACUNA_REF_NORMS(double)
#undef LACUNA_REF_NORMS

}  // namespace lacuna::kernels::ref
