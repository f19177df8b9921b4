// NCCL communicators for the CUDA backend (one process per GPU).
//
// Which communicators: every process derives the same list from the plan of
// all executed ranks (comm_specs, host-only, tested on the CPU), creates them
// in that order with ncclCommInitRank, and so never deadlocks in init.
// - kWorld: every executed rank; an all-reduce of one element at the start of
//   each iteration aligns the ranks' t0 (only with more than one rank).
// - kGroup (group, stream name): the collectives of a program group issued
//   from streams of that name. NCCL runs the operations of one communicator
//   in issue order and needs that order to agree on every member; the
//   program's order on one stream does, the host's interleaving of several
//   streams would not. Members must issue a group's collectives from streams
//   of the same name (else comm_specs reports the mismatch).
// - kP2p (src, dst, channel): the sends src → dst on that channel and the
//   matching recvs, in program order: exactly the IR's matching rule, and one
//   direction per communicator, so two ranks sending to each other at once
//   cannot block each other.
// Emulated ops (replay) use no communicator.
#pragma once

#include <chrono>
#include <compare>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/plan.h"

struct ncclComm;  // nccl.h's opaque communicator

namespace lacuna::kernels::nccl {
class Library;
}

namespace lacuna::runtime {

enum class CommKind { kWorld = 0, kGroup = 1, kP2p = 2 };

struct CommKey {
  CommKind kind = CommKind::kWorld;
  int a = 0;  // group; p2p: src
  int b = 0;  // p2p: dst
  int channel = 0;
  std::string stream;  // kGroup: the issuing streams' name
  auto operator<=>(const CommKey&) const = default;
};

struct CommSpec {
  CommKey key;
  std::vector<int> members;  // global ranks, ascending; NCCL rank = index
  std::string describe() const;
};

// The communicators `plan` needs, in the order every process creates them.
// Throws lacuna::Error when members disagree on how many operations a
// communicator carries (a mismatched collective or an unmatched send/recv),
// before anything runs.
std::vector<CommSpec> comm_specs(const Plan& plan);

// The key of a non-emulated collective / send / recv of `sp`.
CommKey comm_key_of(const StreamPlan& sp, const PlannedOp& op);

// The communicators of one rank (CUDA builds only). Ids: one 128-byte
// ncclUniqueId per spec, all made by one process (make_unique_ids).
class NcclComms {
 public:
  NcclComms(const kernels::nccl::Library& lib, const std::vector<CommSpec>& specs, const std::string& ids,
            int rank, int device);
  ~NcclComms();
  NcclComms(const NcclComms&) = delete;
  NcclComms& operator=(const NcclComms&) = delete;

  struct Entry {
    ::ncclComm* comm = nullptr;
    int nccl_rank = 0;
    int size = 0;
    std::string name;
  };
  // Throws when this rank has no such communicator.
  const Entry& get(const CommKey& key) const;
  const kernels::nccl::Library& lib() const { return lib_; }
  // "" or the first asynchronous NCCL error, naming the communicator.
  std::string async_error() const;
  // ncclCommAbort on every communicator: in-flight NCCL kernels return.
  void abort_all();

 private:
  const kernels::nccl::Library& lib_;
  std::map<CommKey, Entry> comms_;
  bool aborted_ = false;
};

std::string make_unique_ids(const kernels::nccl::Library& lib, std::size_t count);

}  // namespace lacuna::runtime
