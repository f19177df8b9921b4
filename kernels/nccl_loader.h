// NCCL loaded at run time with dlopen, so that `lacuna` starts (and calibrates
// the CPU) on machines without libnccl. Search order: the path in
// $LACUNA_NCCL, then "libnccl.so.2", then "libnccl.so" (the dynamic loader's
// usual search: LD_LIBRARY_PATH, the cache, /usr/lib...). Nothing is linked
// against libnccl; the types below are NCCL's C ABI (nccl.h: handles are
// pointers, enums are int) and are checked against nccl.h in CUDA builds.
// The library stays loaded for the life of the process (NCCL does not
// support being unloaded).
#pragma once

#include <string>

struct ncclComm;  // nccl.h's opaque communicator

namespace lacuna::kernels::nccl {

using Result = int;        // ncclResult_t; 0 = ncclSuccess
using Comm = ::ncclComm*;  // ncclComm_t
using DataType = int;      // ncclDataType_t
using RedOp = int;         // ncclRedOp_t
using Stream = void*;      // cudaStream_t

inline constexpr Result kSuccess = 0;
inline constexpr DataType kBfloat16 = 9;  // ncclBfloat16
inline constexpr RedOp kSum = 0;          // ncclSum

// ncclUniqueId: 128 opaque bytes (NCCL_UNIQUE_ID_BYTES), passed by value.
struct UniqueId {
  char internal[128];
};

struct Api {
  Result (*GetVersion)(int* version) = nullptr;
  Result (*CommInitAll)(Comm* comms, int ndev, const int* devlist) = nullptr;
  Result (*CommDestroy)(Comm comm) = nullptr;
  Result (*AllReduce)(const void* send, void* recv, size_t count, DataType type, RedOp op, Comm comm,
                      Stream stream) = nullptr;
  Result (*AllGather)(const void* send, void* recv, size_t send_count, DataType type, Comm comm,
                      Stream stream) = nullptr;
  Result (*ReduceScatter)(const void* send, void* recv, size_t recv_count, DataType type, RedOp op, Comm comm,
                          Stream stream) = nullptr;
  // Absent before NCCL 2.28: callers emulate all-to-all with grouped Send/Recv.
  Result (*AlltoAll)(const void* send, void* recv, size_t count, DataType type, Comm comm, Stream stream) = nullptr;
  Result (*Send)(const void* send, size_t count, DataType type, int peer, Comm comm, Stream stream) = nullptr;
  Result (*Recv)(void* recv, size_t count, DataType type, int peer, Comm comm, Stream stream) = nullptr;
  Result (*GroupStart)() = nullptr;
  Result (*GroupEnd)() = nullptr;
  const char* (*GetErrorString)(Result result) = nullptr;
  // The executor's (runtime/cuda_nccl.h): one process per GPU. Resolved when
  // present; Library::require() names a missing one.
  Result (*GetUniqueId)(UniqueId* id) = nullptr;
  Result (*CommInitRank)(Comm* comm, int nranks, UniqueId id, int rank) = nullptr;
  Result (*Broadcast)(const void* send, void* recv, size_t count, DataType type, int root, Comm comm,
                      Stream stream) = nullptr;
  Result (*Reduce)(const void* send, void* recv, size_t count, DataType type, RedOp op, int root, Comm comm,
                   Stream stream) = nullptr;
  Result (*CommAbort)(Comm comm) = nullptr;
  Result (*CommGetAsyncError)(Comm comm, Result* async_error) = nullptr;
};

class Library {
 public:
  // Loads and resolves every symbol; throws lacuna::Error naming each path
  // tried and the loader's message when NCCL is absent or incomplete. Never
  // crashes on a bogus path.
  static Library load();

  const Api& api() const { return api_; }
  const std::string& path() const { return path_; }  // the name or path that loaded
  int version_code() const { return version_; }      // ncclGetVersion, e.g. 22809
  std::string version() const;                        // "2.28.9"
  bool has_alltoall() const { return api_.AlltoAll != nullptr; }

  // Throws lacuna::Error with ncclGetErrorString when r is not ncclSuccess.
  void check(Result r, const char* what) const;
  // Throws lacuna::Error when an optional entry point (the executor's) is
  // absent from the loaded library.
  void require(bool present, const char* name) const;

 private:
  Api api_;
  std::string path_;
  int version_ = 0;
};

// NCCL's version code as "major.minor.patch" (codes ≥ 2.9: major·10000 +
// minor·100 + patch; older: major·1000 + minor·100 + patch).
std::string version_string(int code);

}  // namespace lacuna::kernels::nccl
