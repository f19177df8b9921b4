#include "kernels/nccl_loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "sim/core/error.h"

#ifdef LACUNA_HAVE_CUDA
#include <nccl.h>
#include <type_traits>
// The ABI declared in nccl_loader.h is nccl.h's.
static_assert(std::is_same_v<lacuna::kernels::nccl::Comm, ncclComm_t>);
static_assert(static_cast<int>(ncclSuccess) == lacuna::kernels::nccl::kSuccess);
static_assert(static_cast<int>(ncclBfloat16) == lacuna::kernels::nccl::kBfloat16);
static_assert(static_cast<int>(ncclSum) == lacuna::kernels::nccl::kSum);
static_assert(sizeof(ncclResult_t) == sizeof(int) && sizeof(ncclDataType_t) == sizeof(int) &&
              sizeof(ncclRedOp_t) == sizeof(int));
static_assert(sizeof(cudaStream_t) == sizeof(void*));
static_assert(sizeof(ncclUniqueId) == sizeof(lacuna::kernels::nccl::UniqueId));
#endif

namespace lacuna::kernels::nccl {

std::string version_string(int code) {
  if (code <= 0) return {};
  if (code >= 20900) return fmt::format("{}.{}.{}", code / 10000, (code % 10000) / 100, code % 100);
  return fmt::format("{}.{}.{}", code / 1000, (code % 1000) / 100, code % 100);
}

std::string Library::version() const { return version_string(version_); }

void Library::check(Result r, const char* what) const {
  if (r == kSuccess) return;
  const char* msg = api_.GetErrorString ? api_.GetErrorString(r) : nullptr;
  throw Error(fmt::format("NCCL {} failed: {} (ncclResult_t {})", what, msg ? msg : "unknown error", r));
}

void Library::require(bool present, const char* name) const {
  if (present) return;
  throw Error(SourceLocation{}, fmt::format("{} has no {}", path_, name),
              "use NCCL >= 2.7 (point LACUNA_NCCL at its libnccl.so.2)");
}

Library Library::load() {
  std::vector<std::string> candidates;
  const char* env = std::getenv("LACUNA_NCCL");
  const bool from_env = env != nullptr && *env != '\0';
  if (from_env) {
    candidates.emplace_back(env);  // an explicit choice: no fallback that would hide a wrong path
  } else {
    candidates = {"libnccl.so.2", "libnccl.so"};
  }
  void* handle = nullptr;
  std::string tried, used;
  for (const std::string& c : candidates) {
    ::dlerror();
    handle = ::dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) {
      used = c;
      break;
    }
    const char* why = ::dlerror();
    tried += fmt::format("\n  {}: {}", c, why ? why : "not found");
  }
  if (handle == nullptr) {
    throw Error(SourceLocation{}, fmt::format("cannot load NCCL (libnccl) for the collective benchmarks; tried:{}", tried),
                from_env ? "LACUNA_NCCL names the library to load: point it at an existing libnccl.so.2, or unset it"
                         : "install NCCL, add its lib directory to LD_LIBRARY_PATH (e.g. python's "
                           "site-packages/nvidia/nccl/lib), set LACUNA_NCCL=/path/to/libnccl.so.2, or pass "
                           "--no-collectives");
  }
  Library lib;
  lib.path_ = used;
  std::string missing;
  const auto resolve = [&](auto& fn, const char* name, bool required) {
    ::dlerror();
    void* sym = ::dlsym(handle, name);
    if (sym == nullptr) {
      if (required) missing += (missing.empty() ? "" : ", ") + std::string(name);
      return;
    }
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(sym);
  };
  Api& a = lib.api_;
  resolve(a.GetVersion, "ncclGetVersion", true);
  resolve(a.CommInitAll, "ncclCommInitAll", true);
  resolve(a.CommDestroy, "ncclCommDestroy", true);
  resolve(a.AllReduce, "ncclAllReduce", true);
  resolve(a.AllGather, "ncclAllGather", true);
  resolve(a.ReduceScatter, "ncclReduceScatter", true);
  resolve(a.AlltoAll, "ncclAlltoAll", false);
  resolve(a.Send, "ncclSend", true);
  resolve(a.Recv, "ncclRecv", true);
  resolve(a.GroupStart, "ncclGroupStart", true);
  resolve(a.GroupEnd, "ncclGroupEnd", true);
  resolve(a.GetErrorString, "ncclGetErrorString", true);
  resolve(a.GetUniqueId, "ncclGetUniqueId", false);
  resolve(a.CommInitRank, "ncclCommInitRank", false);
  resolve(a.Broadcast, "ncclBroadcast", false);
  resolve(a.Reduce, "ncclReduce", false);
  resolve(a.CommAbort, "ncclCommAbort", false);
  resolve(a.CommGetAsyncError, "ncclCommGetAsyncError", false);
  if (!missing.empty()) {
    ::dlclose(handle);
    throw Error(SourceLocation{}, fmt::format("{} is not a usable NCCL: missing {}", used, missing),
                "use NCCL ≥ 2.7 (point LACUNA_NCCL at its libnccl.so.2)");
  }
  int v = 0;
  lib.check(a.GetVersion(&v), "ncclGetVersion");
  lib.version_ = v;
  return lib;  // the handle is deliberately never closed
}

}  // namespace lacuna::kernels::nccl
