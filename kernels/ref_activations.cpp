#include "kernels/ref_activations.h"

#include <cmath>
#include <limits>
#include <numbers>
#include <string>

#include "kernels/ref_checks.h"
#include "sim/core/error.h"

namespace lacuna::kernels::ref {
namespace {

// [t, f] with t, f > 0; returns t·f without overflow.
std::size_t checked_elements(const char* fn, std::int64_t t, std::int64_t f) {
  if (t <= 0 || f <= 0)
    throw Error(std::string(fn) + ": shape [t=" + std::to_string(t) + ", f=" + std::to_string(f) +
                "] must have t > 0 and f > 0");
  if (t > std::numeric_limits<std::int64_t>::max() / 2 / f) throw Error(std::string(fn) + ": t·2f overflows");
  return static_cast<std::size_t>(t * f);
}

constexpr double kSqrt2OverPi = std::numbers::sqrt2 * std::numbers::inv_sqrtpi;  // √(2/π)
constexpr double kGeluCubic = 0.044715;

double gelu(double x, GeluKind kind) {
  if (kind == GeluKind::kTanh)
    return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + kGeluCubic * x * x * x)));
  return 0.5 * x * (1.0 + std::erf(x / std::numbers::sqrt2));
}

double gelu_grad(double x, GeluKind kind) {
  if (kind == GeluKind::kTanh) {
    const double th = std::tanh(kSqrt2OverPi * (x + kGeluCubic * x * x * x));
    return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * kSqrt2OverPi * (1.0 + 3.0 * kGeluCubic * x * x);
  }
  // Φ(x) + x·φ(x).
  const double pdf = std::exp(-0.5 * x * x) * std::numbers::inv_sqrtpi / std::numbers::sqrt2;
  return 0.5 * (1.0 + std::erf(x / std::numbers::sqrt2)) + x * pdf;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

}  // namespace

template <typename T>
void gelu_forward(std::span<const T> x, GeluKind kind, std::span<T> y) {
  check_size("ref::gelu_forward", "y", y.size(), x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = static_cast<T>(gelu(x[i], kind));
}

template <typename T>
void gelu_backward(std::span<const T> x, std::span<const T> dy, GeluKind kind, std::span<T> dx) {
  check_size("ref::gelu_backward", "dy", dy.size(), x.size());
  check_size("ref::gelu_backward", "dx", dx.size(), x.size());
  for (std::size_t i = 0; i < x.size(); ++i) dx[i] = static_cast<T>(dy[i] * gelu_grad(x[i], kind));
}

template <typename T>
void swiglu_forward(std::span<const T> x, std::int64_t t, std::int64_t f, std::span<T> y) {
  const char* fn = "ref::swiglu_forward";
  const std::size_t n = checked_elements(fn, t, f);
  check_size(fn, "x (t·2f)", x.size(), 2 * n);
  check_size(fn, "y (t·f)", y.size(), n);
  const auto fw = static_cast<std::size_t>(f);
  for (std::size_t r = 0; r < static_cast<std::size_t>(t); ++r)
    for (std::size_t j = 0; j < fw; ++j) {
      const double gate = x[r * 2 * fw + j], up = x[r * 2 * fw + fw + j];
      y[r * fw + j] = static_cast<T>(gate * sigmoid(gate) * up);
    }
}

template <typename T>
void swiglu_backward(std::span<const T> x, std::span<const T> dy, std::int64_t t, std::int64_t f,
                     std::span<T> dx) {
  const char* fn = "ref::swiglu_backward";
  const std::size_t n = checked_elements(fn, t, f);
  check_size(fn, "x (t·2f)", x.size(), 2 * n);
  check_size(fn, "dy (t·f)", dy.size(), n);
  check_size(fn, "dx (t·2f)", dx.size(), 2 * n);
  const auto fw = static_cast<std::size_t>(f);
  for (std::size_t r = 0; r < static_cast<std::size_t>(t); ++r)
    for (std::size_t j = 0; j < fw; ++j) {
      const double gate = x[r * 2 * fw + j], up = x[r * 2 * fw + fw + j], g = dy[r * fw + j];
      const double s = sigmoid(gate);
      // silu'(z) = σ(z)·(1 + z·(1 − σ(z))).
      dx[r * 2 * fw + j] = static_cast<T>(g * up * s * (1.0 + gate * (1.0 - s)));
      dx[r * 2 * fw + fw + j] = static_cast<T>(g * gate * s);
    }
}

template <typename T>
void residual_add(std::span<const T> a, std::span<const T> b, std::span<T> out) {
  check_size("ref::residual_add", "b", b.size(), a.size());
  check_size("ref::residual_add", "out", out.size(), a.size());
  // Elementwise and index-for-index, so aliasing out with a or b is safe.
  for (std::size_t i = 0; i < a.size(); ++i) out[i] = static_cast<T>(static_cast<double>(a[i]) + b[i]);
}

#define LACUNA_REF_ACTIVATIONS(T)                                                                             \
  template void gelu_forward<T>(std::span<const T>, GeluKind, std::span<T>);                                  \
  template void gelu_backward<T>(std::span<const T>, std::span<const T>, GeluKind, std::span<T>);             \
  template void swiglu_forward<T>(std::span<const T>, std::int64_t, std::int64_t, std::span<T>);              \
  template void swiglu_backward<T>(std::span<const T>, std::span<const T>, std::int64_t, std::int64_t,        \
                                   std::span<T>);                                                             \
  template void residual_add<T>(std::span<const T>, std::span<const T>, std::span<T>);
LACUNA_REF_ACTIVATIONS(float)
LACUNA_REF_ACTIVATIONS(double)
#undef LACUNA_REF_ACTIVATIONS

}  // namespace lacuna::kernels::ref
