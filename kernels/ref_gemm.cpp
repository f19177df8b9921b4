#include "kernels/ref_gemm.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "kernels/ref_checks.h"
#include "sim/core/error.h"

namespace lacuna::kernels::ref {
namespace {

void check_positive(const char* fn, const char* name, std::int64_t v) {
  if (v <= 0) throw Error(std::string(fn) + ": " + name + " = " + std::to_string(v) + " must be > 0");
}

// a·b for positive a, b, or an Error instead of overflow.
std::size_t checked_mul(const char* fn, std::int64_t a, std::int64_t b) {
  if (a > std::numeric_limits<std::int64_t>::max() / b) throw Error(std::string(fn) + ": size overflows");
  return static_cast<std::size_t>(a * b);
}

// Validates (tp, rank) and that `width` splits evenly; returns width/tp.
std::int64_t shard_width(const char* fn, const char* what, std::int64_t width, int tp, int rank) {
  if (tp <= 0) throw Error(std::string(fn) + ": tp = " + std::to_string(tp) + " must be > 0");
  if (rank < 0 || rank >= tp)
    throw Error(std::string(fn) + ": rank " + std::to_string(rank) + " is outside [0, " + std::to_string(tp) + ")");
  if (width % tp != 0)
    throw Error(std::string(fn) + ": " + what + " = " + std::to_string(width) + " is not divisible by " +
                std::to_string(tp));
  return width / tp;
}

}  // namespace

template <typename T>
void gemm(std::span<const T> a, std::span<const T> b, GemmShape s, std::span<T> c) {
  const char* fn = "ref::gemm";
  check_positive(fn, "m", s.m);
  check_positive(fn, "n", s.n);
  check_positive(fn, "k", s.k);
  check_size(fn, "A (m·k)", a.size(), checked_mul(fn, s.m, s.k));
  check_size(fn, "B (k·n)", b.size(), checked_mul(fn, s.k, s.n));
  check_size(fn, "C (m·n)", c.size(), checked_mul(fn, s.m, s.n));
  const auto m = static_cast<std::size_t>(s.m), n = static_cast<std::size_t>(s.n), k = static_cast<std::size_t>(s.k);
  // i-p-j order with a double row accumulator: B is walked along rows when not
  // transposed, and every product is summed in double.
  std::vector<double> acc(n);
  for (std::size_t i = 0; i < m; ++i) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (std::size_t p = 0; p < k; ++p) {
      const double aip = s.trans_a ? a[p * m + i] : a[i * k + p];
      if (s.trans_b)
        for (std::size_t j = 0; j < n; ++j) acc[j] += aip * b[j * k + p];
      else
        for (std::size_t j = 0; j < n; ++j) acc[j] += aip * b[p * n + j];
    }
    for (std::size_t j = 0; j < n; ++j) c[i * n + j] = static_cast<T>(acc[j]);
  }
}

template <typename T>
void linear_forward(std::span<const T> x, std::span<const T> w, LinearShape s, std::span<T> y) {
  gemm<T>(x, w, {s.t, s.out, s.in, false, false}, y);
}

template <typename T>
void linear_dgrad(std::span<const T> dy, std::span<const T> w, LinearShape s, std::span<T> dx) {
  gemm<T>(dy, w, {s.t, s.in, s.out, false, true}, dx);
}

template <typename T>
void linear_wgrad(std::span<const T> x, std::span<const T> dy, LinearShape s, std::span<T> dw) {
  gemm<T>(x, dy, {s.in, s.out, s.t, true, false}, dw);
}

template <typename T>
void shard_columns(std::span<const T> src, std::int64_t rows, std::int64_t cols, int parts, int part,
                   std::span<T> dst) {
  const char* fn = "ref::shard_columns";
  check_positive(fn, "rows", rows);
  check_positive(fn, "cols", cols);
  const std::int64_t w = shard_width(fn, "cols", cols, parts, part);
  check_size(fn, "src", src.size(), checked_mul(fn, rows, cols));
  check_size(fn, "dst", dst.size(), checked_mul(fn, rows, w));
  const auto c = static_cast<std::size_t>(cols), sw = static_cast<std::size_t>(w);
  const std::size_t begin = static_cast<std::size_t>(part) * sw;
  for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r)
    for (std::size_t j = 0; j < sw; ++j) dst[r * sw + j] = src[r * c + begin + j];
}

template <typename T>
void shard_rows(std::span<const T> src, std::int64_t rows, std::int64_t cols, int parts, int part,
                std::span<T> dst) {
  const char* fn = "ref::shard_rows";
  check_positive(fn, "rows", rows);
  check_positive(fn, "cols", cols);
  const std::int64_t r = shard_width(fn, "rows", rows, parts, part);
  check_size(fn, "src", src.size(), checked_mul(fn, rows, cols));
  const std::size_t n = checked_mul(fn, r, cols);
  check_size(fn, "dst", dst.size(), n);
  // Row blocks are contiguous in row-major storage.
  const auto block = src.subspan(static_cast<std::size_t>(part) * n, n);
  std::copy(block.begin(), block.end(), dst.begin());
}

template <typename T>
void column_parallel_forward(std::span<const T> x, std::span<const T> w, LinearShape s, int tp, int rank,
                             std::span<T> y_shard) {
  const char* fn = "ref::column_parallel_forward";
  check_positive(fn, "in", s.in);
  const std::int64_t out_r = shard_width(fn, "out", s.out, tp, rank);
  std::vector<T> w_r(checked_mul(fn, s.in, out_r));
  shard_columns<T>(w, s.in, s.out, tp, rank, w_r);
  linear_forward<T>(x, w_r, {s.t, s.in, out_r}, y_shard);
}

template <typename T>
void row_parallel_forward(std::span<const T> x_shard, std::span<const T> w, LinearShape s, int tp, int rank,
                          std::span<T> y_partial) {
  const char* fn = "ref::row_parallel_forward";
  check_positive(fn, "out", s.out);
  const std::int64_t in_r = shard_width(fn, "in", s.in, tp, rank);
  std::vector<T> w_r(checked_mul(fn, in_r, s.out));
  shard_rows<T>(w, s.in, s.out, tp, rank, w_r);
  linear_forward<T>(x_shard, w_r, {s.t, in_r, s.out}, y_partial);
}

#define LACUNA_REF_GEMM(T)                                                                                   \
  template void gemm<T>(std::span<const T>, std::span<const T>, GemmShape, std::span<T>);                    \
  template void linear_forward<T>(std::span<const T>, std::span<const T>, LinearShape, std::span<T>);        \
  template void linear_dgrad<T>(std::span<const T>, std::span<const T>, LinearShape, std::span<T>);          \
  template void linear_wgrad<T>(std::span<const T>, std::span<const T>, LinearShape, std::span<T>);          \
  template void shard_columns<T>(std::span<const T>, std::int64_t, std::int64_t, int, int, std::span<T>);    \
  template void shard_rows<T>(std::span<const T>, std::int64_t, std::int64_t, int, int, std::span<T>);       \
  template void column_parallel_forward<T>(std::span<const T>, std::span<const T>, LinearShape, int, int,    \
                                           std::span<T>);                                                    \
  template void row_parallel_forward<T>(std::span<const T>, std::span<const T>, LinearShape, int, int,       \
                                        std::span<T>);
LACUNA_REF_GEMM(float)
LACUNA_REF_GEMM(double)
#undef LACUNA_REF_GEMM

}  // namespace lacuna::kernels::ref
