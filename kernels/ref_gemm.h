// CPU reference GEMM and the three products of a linear layer, unsharded and
// as a tensor-parallel shard (docs/kernels.md: X[t,in]·W[in,out]; GEMM shape
// [m, n, k]).
//
// Storage T (float, or double for finite-difference tests), each dot product
// accumulated in double; call with an explicit T: ref::gemm<float>(...).
// Row-major, no global state; wrong sizes throw lacuna::Error.
#pragma once

#include <cstdint>
#include <span>

namespace lacuna::kernels::ref {

// C[m, n] = op(A)·op(B), op(A) is [m, k], op(B) is [k, n].
// trans_a: A is stored [k, m] (row-major) and used transposed; else [m, k].
// trans_b: B is stored [n, k] and used transposed; else [k, n].
struct GemmShape {
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  bool trans_a = false;
  bool trans_b = false;
};

// C is overwritten. m, n, k > 0.
template <typename T>
void gemm(std::span<const T> a, std::span<const T> b, GemmShape s, std::span<T> c);

// A linear layer Y[t, out] = X[t, in]·W[in, out]. W is stored [in, out] as in
// docs/kernels.md (Megatron keeps weight [out, in] and computes X·weightᵀ; same
// product, transposed storage).
struct LinearShape {
  std::int64_t t = 0;
  std::int64_t in = 0;
  std::int64_t out = 0;
};

// Forward Y = X·W: GEMM [t, out, in].
template <typename T>
void linear_forward(std::span<const T> x, std::span<const T> w, LinearShape s, std::span<T> y);
// Input gradient (dgrad, "B") dX = dY·Wᵀ: GEMM [t, in, out].
template <typename T>
void linear_dgrad(std::span<const T> dy, std::span<const T> w, LinearShape s, std::span<T> dx);
// Weight gradient (wgrad, "W") dW = Xᵀ·dY: GEMM [in, out, t]; dW overwritten.
template <typename T>
void linear_wgrad(std::span<const T> x, std::span<const T> dy, LinearShape s, std::span<T> dw);

// Copies block `part` of `parts` equal column blocks of src[rows, cols] into
// dst[rows, cols/parts]. cols must divide evenly (Megatron requires it).
template <typename T>
void shard_columns(std::span<const T> src, std::int64_t rows, std::int64_t cols, int parts, int part,
                   std::span<T> dst);
// Copies block `part` of `parts` equal row blocks of src[rows, cols] into dst[rows/parts, cols].
template <typename T>
void shard_rows(std::span<const T> src, std::int64_t rows, std::int64_t cols, int parts, int part,
                std::span<T> dst);

// Column-parallel linear (QKV, FC1, logits): rank `rank` of `tp` holds the
// columns W[:, rank·out/tp ...] and computes y_shard[t, out/tp] = X·W_rank from
// the full X (after the SP all-gather). Concatenating the shards' columns gives Y.
// `w` is the full, unsharded weight [in, out]; the shard is cut from it.
template <typename T>
void column_parallel_forward(std::span<const T> x, std::span<const T> w, LinearShape s, int tp, int rank,
                             std::span<T> y_shard);

// Row-parallel linear (attention projection, FC2): rank `rank` holds the rows
// W[rank·in/tp ..., :] and its input shard x_shard[t, in/tp] (the column-parallel
// output), and computes a partial y_partial[t, out] = x_shard·W_rank. The sum over
// ranks (the all-reduce, or reduce-scatter with SP) is Y. `w` is the full weight.
template <typename T>
void row_parallel_forward(std::span<const T> x_shard, std::span<const T> w, LinearShape s, int tp, int rank,
                          std::span<T> y_partial);

}  // namespace lacuna::kernels::ref
