#include "runtime/cuda_nccl.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <sstream>

#include "kernels/nccl_loader.h"
#include "sim/core/error.h"

#ifdef LACUNA_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace lacuna::runtime {

std::string CommSpec::describe() const {
  switch (key.kind) {
    case CommKind::kWorld: return "world communicator";
    case CommKind::kGroup:
      return "communicator of group " + std::to_string(key.a) + " on streams '" + key.stream + "'";
    case CommKind::kP2p:
      return "p2p communicator rank " + std::to_string(key.a) + " -> rank " + std::to_string(key.b) + " channel " +
             std::to_string(key.channel);
  }
  return "communicator";
}

CommKey comm_key_of(const StreamPlan& sp, const PlannedOp& op) {
  CommKey k;
  if (op.kind == OpKind::kCollective) {
    k.kind = CommKind::kGroup;
    k.a = op.group;
    k.stream = sp.name;
  } else {
    k.kind = CommKind::kP2p;
    k.a = op.kind == OpKind::kSend ? sp.rank : op.peer;
    k.b = op.kind == OpKind::kSend ? op.peer : sp.rank;
    k.channel = op.channel;
  }
  return k;
}

std::vector<CommSpec> comm_specs(const Plan& plan) {
  struct Use {
    std::map<int, std::int64_t> per_rank;  // collectives issued per member
    int group_size = 0;
    std::int64_t sends = 0, recvs = 0;
  };
  std::map<CommKey, Use> uses;
  for (const StreamPlan& sp : plan.streams) {
    for (const PlannedOp& p : sp.ops) {
      if (p.emulated) continue;
      if (p.kind != OpKind::kCollective && p.kind != OpKind::kSend && p.kind != OpKind::kRecv) continue;
      Use& u = uses[comm_key_of(sp, p)];
      if (p.kind == OpKind::kCollective) {
        ++u.per_rank[sp.rank];
        u.group_size = p.group_size;
      } else {
        ++(p.kind == OpKind::kSend ? u.sends : u.recvs);
      }
    }
  }
  std::vector<CommSpec> out;
  if (plan.ranks.size() > 1) out.push_back(CommSpec{CommKey{}, plan.ranks});
  for (const auto& [key, u] : uses) {
    CommSpec spec{key, {}};
    if (key.kind == CommKind::kGroup) {
      bool same = static_cast<int>(u.per_rank.size()) == u.group_size;
      for (const auto& [r, n] : u.per_rank) {
        same = same && n == u.per_rank.begin()->second;
        spec.members.push_back(r);  // ascending: std::map
      }
      if (!same) {
        std::ostringstream why;
        why << "mismatched collectives on group " << key.a << " (streams '" << key.stream
            << "'): the members issue different numbers of them:";
        for (const auto& [r, n] : u.per_rank) why << " rank " << r << ": " << n << ";";
        why << " " << u.group_size - static_cast<int>(u.per_rank.size())
            << " member(s) issue none from a stream of that name";
        throw Error(SourceLocation{}, "execute (cuda): " + why.str(),
                    "every member must issue the group's collectives in the same order from streams of the same "
                    "name (the CUDA backend runs them on one NCCL communicator per group and stream name)");
      }
    } else {
      spec.members = {std::min(key.a, key.b), std::max(key.a, key.b)};
      if (u.sends != u.recvs) {
        throw Error("execute (cuda): rank " + std::to_string(key.a) + " sends " + std::to_string(u.sends) +
                    " message(s) to rank " + std::to_string(key.b) + " on channel " + std::to_string(key.channel) +
                    " but rank " + std::to_string(key.b) + " receives " + std::to_string(u.recvs) +
                    ": a send without a receive (or the reverse) would hang");
      }
    }
    out.push_back(std::move(spec));
  }
  return out;
}

#ifdef LACUNA_HAVE_CUDA

namespace {
void check_cuda(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) throw Error("CUDA: " + what + ": " + cudaGetErrorString(e));
}
}  // namespace

std::string make_unique_ids(const kernels::nccl::Library& lib, std::size_t count) {
  lib.require(lib.api().GetUniqueId != nullptr, "ncclGetUniqueId");
  std::string out;
  out.reserve(count * sizeof(kernels::nccl::UniqueId));
  for (std::size_t i = 0; i < count; ++i) {
    kernels::nccl::UniqueId id{};
    lib.check(lib.api().GetUniqueId(&id), "ncclGetUniqueId");
    out.append(id.internal, sizeof id.internal);
  }
  return out;
}

NcclComms::NcclComms(const kernels::nccl::Library& lib, const std::vector<CommSpec>& specs,
                     const std::string& ids, int rank, int device)
    : lib_(lib) {
  lib.require(lib.api().CommInitRank != nullptr, "ncclCommInitRank");
  lib.require(lib.api().CommAbort != nullptr, "ncclCommAbort");
  lib.require(lib.api().CommGetAsyncError != nullptr, "ncclCommGetAsyncError");
  if (ids.size() != specs.size() * sizeof(kernels::nccl::UniqueId)) {
    throw Error("execute (cuda): got " + std::to_string(ids.size()) + " bytes of NCCL ids for " +
                std::to_string(specs.size()) + " communicators");
  }
  check_cuda(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const CommSpec& spec = specs[i];
    const auto me = std::find(spec.members.begin(), spec.members.end(), rank);
    if (me == spec.members.end()) continue;
    kernels::nccl::UniqueId id{};
    std::memcpy(id.internal, ids.data() + i * sizeof id.internal, sizeof id.internal);
    Entry e;
    e.nccl_rank = static_cast<int>(me - spec.members.begin());
    e.size = static_cast<int>(spec.members.size());
    e.name = spec.describe();
    const std::string what = "ncclCommInitRank (rank " + std::to_string(rank) + ", " + e.name + ")";
    lib.check(lib.api().CommInitRank(&e.comm, e.size, id, e.nccl_rank), what.c_str());
    comms_.emplace(spec.key, std::move(e));
  }
}

NcclComms::~NcclComms() {
  // Best effort; an aborted communicator is already released.
  if (aborted_) return;
  for (auto& [key, e] : comms_) {
    if (e.comm != nullptr) lib_.api().CommDestroy(e.comm);
  }
}

const NcclComms::Entry& NcclComms::get(const CommKey& key) const {
  const auto it = comms_.find(key);
  if (it == comms_.end()) throw InternalError("execute (cuda): internal: no NCCL communicator for this operation");
  return it->second;
}

std::string NcclComms::async_error() const {
  for (const auto& [key, e] : comms_) {
    kernels::nccl::Result async = kernels::nccl::kSuccess;
    const kernels::nccl::Result r = lib_.api().CommGetAsyncError(e.comm, &async);
    if (r != kernels::nccl::kSuccess) return e.name + ": ncclCommGetAsyncError failed (" + std::to_string(r) + ")";
    // ncclInProgress (7) is not an error: a non-blocking operation is running.
    if (async != kernels::nccl::kSuccess && async != 7) {
      const char* msg = lib_.api().GetErrorString ? lib_.api().GetErrorString(async) : nullptr;
      return e.name + ": NCCL asynchronous error: " + (msg ? msg : "unknown") + " (ncclResult_t " +
             std::to_string(async) + ")";
    }
  }
  return {};
}

void NcclComms::abort_all() {
  if (aborted_) return;
  aborted_ = true;
  for (auto& [key, e] : comms_) {
    if (e.comm != nullptr) lib_.api().CommAbort(e.comm);
  }
}

#endif

}  // namespace lacuna::runtime
