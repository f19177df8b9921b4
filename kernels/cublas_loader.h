// cuBLAS through dlopen: the lacuna binary never links libcublas, so it starts
// (and reports "cuBLAS not found") where the library is absent. Tried in
// order: $LACUNA_CUBLAS, "libcublas.so.13", "libcublas.so", and
// /usr/local/cuda/lib64/libcublas.so.13 (the toolkit's copy, often not on the
// loader path). Only the symbols gpu_gemm.cpp and gpu_context.cpp use are
// resolved. The headers are used for types and signatures only.
#pragma once

#include <string>

namespace lacuna::kernels::gpu {

// Whether cuBLAS loads in this process; never throws. `why_not` (optional)
// gets the reason when it does not (every path tried and dlerror()).
bool cublas_loadable(std::string* why_not = nullptr);

}  // namespace lacuna::kernels::gpu

#ifdef LACUNA_HAVE_CUDA
#include <cublas_api.h>

namespace lacuna::kernels::gpu {

// Signatures as declared in cublas_api.h (written out because the C++ header
// also declares inline overloads of cublasGemmEx, so decltype cannot pick one).
struct CublasApi {
  std::string path;  // what dlopen loaded
  cublasStatus_t (*create)(cublasHandle_t*) = nullptr;         // cublasCreate_v2
  cublasStatus_t (*destroy)(cublasHandle_t) = nullptr;         // cublasDestroy_v2
  cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t) = nullptr;  // cublasSetStream_v2
  cublasStatus_t (*set_math_mode)(cublasHandle_t, cublasMath_t) = nullptr;
  cublasStatus_t (*get_version)(cublasHandle_t, int*) = nullptr;  // cublasGetVersion_v2
  const char* (*status_string)(cublasStatus_t) = nullptr;  // cublasGetStatusString; may be absent
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                            const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                            cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
  cublasStatus_t (*gemm_strided_batched_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                            const void*, const void*, cudaDataType, int, long long int,
                                            const void*, cudaDataType, int, long long int, const void*, void*,
                                            cudaDataType, int, long long int, int, cublasComputeType_t,
                                            cublasGemmAlgo_t) = nullptr;
};

// Loaded once per process (thread-safe) and never unloaded; throws
// lacuna::Error("cuBLAS not found: ...") when it cannot be loaded.
const CublasApi& cublas_api();

// "CUBLAS_STATUS_..." for an error message.
std::string cublas_status_text(cublasStatus_t status);

}  // namespace lacuna::kernels::gpu
#endif
