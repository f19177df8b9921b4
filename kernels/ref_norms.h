// CPU reference LayerNorm and RMSNorm over rows of [t, h] (docs/kernels.md:
// the norm kernels of a layer, on t_sp tokens of hidden size h).
//
// Storage is T (float for the reference the GPU kernels are checked against,
// double for finite-difference tests of the backward); every sum is taken in
// double. Call with an explicit T: ref::layernorm_forward<float>(...).
// Row-major, no global state; a wrong size or shape throws lacuna::Error.
#pragma once

#include <cstdint>
#include <span>

namespace lacuna::kernels::ref {

// t rows (tokens) of h elements (hidden); both must be positive.
struct NormShape {
  std::int64_t t = 0;
  std::int64_t h = 0;
};

// y = gamma·(x − mean)·rstd + beta, rstd = 1/sqrt(var + eps) with the biased
// (1/h) variance as torch.nn.LayerNorm. Saves mean[t] and rstd[t] for the backward.
template <typename T>
void layernorm_forward(std::span<const T> x, std::span<const T> gamma, std::span<const T> beta,
                       NormShape s, double eps, std::span<T> y, std::span<T> mean, std::span<T> rstd);

// From the saved mean/rstd: dx[t, h]; dgamma[h] and dbeta[h] are overwritten
// with the sums over the t rows (not accumulated into).
template <typename T>
void layernorm_backward(std::span<const T> x, std::span<const T> gamma, std::span<const T> dy,
                        std::span<const T> mean, std::span<const T> rstd, NormShape s, std::span<T> dx,
                        std::span<T> dgamma, std::span<T> dbeta);

// y = gamma·x·rstd, rstd = 1/sqrt(mean(x²) + eps) (no centring, no beta). Saves rstd[t].
template <typename T>
void rmsnorm_forward(std::span<const T> x, std::span<const T> gamma, NormShape s, double eps,
                     std::span<T> y, std::span<T> rstd);

// dx[t, h]; dgamma[h] overwritten with the sum over rows.
template <typename T>
void rmsnorm_backward(std::span<const T> x, std::span<const T> gamma, std::span<const T> dy,
                      std::span<const T> rstd, NormShape s, std::span<T> dx, std::span<T> dgamma);

}  // namespace lacuna::kernels::ref
