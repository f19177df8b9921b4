#include "kernels/cublas_loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "sim/core/error.h"

namespace lacuna::kernels::gpu {

#ifdef LACUNA_HAVE_CUDA
namespace {

struct LoadResult {
  CublasApi api;
  std::string error;  // empty: loaded
};

template <typename Fn>
bool resolve(void* lib, const char* name, Fn& out, std::string& missing) {
  void* sym = dlsym(lib, name);
  if (sym == nullptr) {
    missing += missing.empty() ? name : std::string(", ") + name;
    return false;
  }
  out = reinterpret_cast<Fn>(sym);
  return true;
}

LoadResult load() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("LACUNA_CUBLAS"); env != nullptr && *env != '\0') candidates.emplace_back(env);
  candidates.insert(candidates.end(), {"libcublas.so.13", "libcublas.so", "/usr/local/cuda/lib64/libcublas.so.13"});
  LoadResult r;
  std::string tried;
  for (const std::string& path : candidates) {
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* why = dlerror();
      tried += "\n  " + path + ": " + (why != nullptr ? why : "not loadable");
      continue;
    }
    CublasApi& a = r.api;
    a.path = path;
    std::string missing;
    resolve(lib, "cublasCreate_v2", a.create, missing);
    resolve(lib, "cublasDestroy_v2", a.destroy, missing);
    resolve(lib, "cublasSetStream_v2", a.set_stream, missing);
    resolve(lib, "cublasSetMathMode", a.set_math_mode, missing);
    resolve(lib, "cublasGetVersion_v2", a.get_version, missing);
    resolve(lib, "cublasGemmEx", a.gemm_ex, missing);
    resolve(lib, "cublasGemmStridedBatchedEx", a.gemm_strided_batched_ex, missing);
    std::string optional_missing;
    resolve(lib, "cublasGetStatusString", a.status_string, optional_missing);
    if (missing.empty()) return r;
    // A library without the symbols is the wrong one: keep looking, never unload it
    // (dlclose of a half-used CUDA library is not worth the risk).
    tried += "\n  " + path + ": loaded, but lacks " + missing;
    r.api = CublasApi{};
  }
  r.error = "cuBLAS not found: tried" + tried + "\n(set LACUNA_CUBLAS to the path of libcublas.so.13)";
  return r;
}

const LoadResult& loaded() {
  static const LoadResult result = load();  // thread-safe, once per process
  return result;
}

}  // namespace

bool cublas_loadable(std::string* why_not) {
  const LoadResult& r = loaded();
  if (!r.error.empty() && why_not != nullptr) *why_not = r.error;
  return r.error.empty();
}

const CublasApi& cublas_api() {
  const LoadResult& r = loaded();
  if (!r.error.empty()) throw Error(r.error);
  return r.api;
}

std::string cublas_status_text(cublasStatus_t status) {
  const LoadResult& r = loaded();
  if (r.error.empty() && r.api.status_string != nullptr) return r.api.status_string(status);
  return "cublasStatus_t " + std::to_string(static_cast<int>(status));
}

#else

bool cublas_loadable(std::string* why_not) {
  if (why_not != nullptr) *why_not = "this lacuna was built without CUDA";
  return false;
}

#endif

}  // namespace lacuna::kernels::gpu
