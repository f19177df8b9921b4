// GEMM through cuBLAS (loaded by cublas_loader): bf16 A, B, C, fp32
// accumulation. ref::gemm is row-major and cuBLAS column-major; a row-major
// [r, c] matrix is the column-major [c, r] matrix with the same memory, so the
// row-major C = op(A)·op(B) is computed as the column-major
// Cᵀ = op(B)ᵀ·op(A)ᵀ: cuBLAS's first operand is B, its second A, and its
// (m, n) are our (n, m). A row-major operand used as is ([k, n] for B) is,
// read column-major, already the transpose cuBLAS needs (op N, ld = its row
// length); one stored transposed ([n, k] for B) needs op T with ld = k.
#include <limits>
#include <string>

#include "kernels/cublas_loader.h"
#include "kernels/gpu_kernels.h"
#include "sim/core/error.h"

namespace lacuna::kernels::gpu {
namespace {

[[noreturn]] void fail(const char* fn, const std::string& what) {
  throw Error(std::string("gpu::") + fn + ": " + what);
}

[[maybe_unused]] void need(const char* fn, const char* name, const DeviceBuffer& b, int64_t elements) {
  if (b.empty()) fail(fn, std::string(name) + " is not allocated");
  if (b.dtype() != DType::kBf16) fail(fn, std::string(name) + " is " + dtype_name(b.dtype()) + ", expected bf16");
  if (b.size() != elements)
    fail(fn, std::string(name) + " has " + std::to_string(b.size()) + " elements, expected " +
                 std::to_string(elements));
}

void check_dims(const char* fn, const ref::GemmShape& s, int64_t batch) {
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  if (s.m < 1 || s.n < 1 || s.k < 1 || batch < 1)
    fail(fn, "m, n, k and batch must be >= 1, got [" + std::to_string(s.m) + ", " + std::to_string(s.n) + ", " +
                 std::to_string(s.k) + "] x " + std::to_string(batch));
  if (s.m > kMax || s.n > kMax || s.k > kMax || batch > kMax) fail(fn, "a dimension exceeds cuBLAS's int range");
  const int64_t kMax64 = std::numeric_limits<int64_t>::max();
  if (s.m > kMax64 / s.k / batch || s.k > kMax64 / s.n / batch || s.m > kMax64 / s.n / batch)
    fail(fn, "element count overflows int64");
}

}  // namespace

#ifdef LACUNA_HAVE_CUDA

namespace {

struct ColumnMajorCall {
  cublasOperation_t op_first, op_second;  // first operand = our B, second = our A
  int m, n, k;                            // cuBLAS's: our n, m, k
  int ld_first, ld_second, ld_c;
};

ColumnMajorCall column_major(const ref::GemmShape& s) {
  ColumnMajorCall c{};
  c.op_first = s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  c.op_second = s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  c.m = static_cast<int>(s.n);
  c.n = static_cast<int>(s.m);
  c.k = static_cast<int>(s.k);
  c.ld_first = static_cast<int>(s.trans_b ? s.k : s.n);   // B stored [n, k] or [k, n]
  c.ld_second = static_cast<int>(s.trans_a ? s.m : s.k);  // A stored [k, m] or [m, k]
  c.ld_c = static_cast<int>(s.n);                         // C stored [m, n]
  return c;
}

void check_status(const char* fn, cublasStatus_t st, const ref::GemmShape& s, int64_t batch) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw Error(std::string("cuBLAS ") + fn + " [" + std::to_string(s.m) + ", " + std::to_string(s.n) + ", " +
                std::to_string(s.k) + "] x " + std::to_string(batch) + " failed: " + cublas_status_text(st));
}

}  // namespace

void gemm(Context& ctx, const DeviceBuffer& a, const DeviceBuffer& b, ref::GemmShape s, DeviceBuffer& c) {
  const char* fn = "gemm";
  check_dims(fn, s, 1);
  need(fn, "A", a, s.m * s.k);
  need(fn, "B", b, s.k * s.n);
  need(fn, "C", c, s.m * s.n);
  const CublasApi& api = cublas_api();
  const ColumnMajorCall cm = column_major(s);
  const float alpha = 1.0f, beta = 0.0f;  // CUBLAS_COMPUTE_32F takes float scalars
  check_status("cublasGemmEx", api.gemm_ex(static_cast<cublasHandle_t>(ctx.cublas_handle()), cm.op_first,
                                          cm.op_second, cm.m, cm.n, cm.k, &alpha, b.data(), CUDA_R_16BF,
                                          cm.ld_first, a.data(), CUDA_R_16BF, cm.ld_second, &beta, c.data(),
                                          CUDA_R_16BF, cm.ld_c, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               s, 1);
}

void gemm_batched(Context& ctx, const DeviceBuffer& a, const DeviceBuffer& b, ref::GemmShape s, int64_t batch,
                  DeviceBuffer& c) {
  const char* fn = "gemm_batched";
  check_dims(fn, s, batch);
  need(fn, "A", a, s.m * s.k * batch);
  need(fn, "B", b, s.k * s.n * batch);
  need(fn, "C", c, s.m * s.n * batch);
  const CublasApi& api = cublas_api();
  const ColumnMajorCall cm = column_major(s);
  const float alpha = 1.0f, beta = 0.0f;
  check_status("cublasGemmStridedBatchedEx",
               api.gemm_strided_batched_ex(static_cast<cublasHandle_t>(ctx.cublas_handle()), cm.op_first,
                                           cm.op_second, cm.m, cm.n, cm.k, &alpha, b.data(), CUDA_R_16BF,
                                           cm.ld_first, static_cast<long long>(s.k * s.n), a.data(), CUDA_R_16BF,
                                           cm.ld_second, static_cast<long long>(s.m * s.k), &beta, c.data(),
                                           CUDA_R_16BF, cm.ld_c, static_cast<long long>(s.m * s.n),
                                           static_cast<int>(batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               s, batch);
}

#else

void gemm(Context&, const DeviceBuffer&, const DeviceBuffer&, ref::GemmShape s, DeviceBuffer&) {
  check_dims("gemm", s, 1);
  fail("gemm", "this lacuna was built without CUDA");
}

void gemm_batched(Context&, const DeviceBuffer&, const DeviceBuffer&, ref::GemmShape s, int64_t batch,
                  DeviceBuffer&) {
  check_dims("gemm_batched", s, batch);
  fail("gemm_batched", "this lacuna was built without CUDA");
}

#endif

}  // namespace lacuna::kernels::gpu
