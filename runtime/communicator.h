// In-process communicator: the ranks of an execution are threads of one
// process, and collectives and point-to-point transfers move real bytes
// between their buffers (runtime/README.md).
//
// Semantics follow sim/proto/program.proto (and NCCL):
// - Collectives are matched per group in call order: the k-th call of every
//   member on group g forms instance #k of g. Kind, element count and root
//   must agree; otherwise every member gets a CommError (kMismatch) naming the
//   group, the ranks and what differs.
// - send/recv are rendezvous: matched in order per (src, dst, channel); both
//   sides return when the bytes are in the receiver's buffer. Tags and sizes of
//   a matched pair must be equal, else both sides get a CommError (kMismatch).
// - Every wait for a peer has a timeout (CommunicatorOptions::timeout). The
//   call that times out throws CommError (kTimeout) with a report of every rank
//   waiting in the communicator, and aborts the communicator with the same
//   report, so every other waiter throws too (kAborted). abort() does the same
//   for a failure outside the communicator.
//
// Thread safety: every member function may be called concurrently from any
// number of threads (several streams of one rank included). Calls of one rank
// on one group (and of one (src, dst, channel) side) are ordered by the time
// they enter the communicator; a caller that issues them from several threads
// must order them itself, as with NCCL.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/error.h"

namespace lacuna::runtime {

enum class CollectiveKind { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kBroadcast, kReduce };

// "all_reduce", "all_gather", ...
std::string_view to_string(CollectiveKind kind);

class CommError : public lacuna::Error {
 public:
  enum class Kind {
    kInvalidArgument,  // a call's own arguments are wrong (bad rank, group, sizes)
    kMismatch,         // the members of a collective or the sides of a transfer disagree
    kTimeout,          // this call waited longer than the timeout (deadlock report in what())
    kAborted,          // abort() was called, or another call timed out
  };
  CommError(Kind kind, const std::string& what) : lacuna::Error(what), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

std::string_view to_string(CommError::Kind kind);

struct CommunicatorOptions {
  // How long a call waits for its peers to arrive before it reports a deadlock.
  std::chrono::milliseconds timeout{10'000};
  // Slice size (floats) of the pipelined chains of broadcast and reduce.
  std::size_t pipeline_chunk_elements = std::size_t{1} << 16;
};

// What one call moved, for bandwidth reporting.
struct CallStats {
  std::int64_t size_bytes = 0;      // nccl-tests' size S (program.proto, Collective.bytes)
  std::int64_t bytes_received = 0;  // bytes this rank copied out of other ranks' buffers
  // When the data started to move: the last member arrived (collectives), both
  // sides were posted (send/recv). The executor's span start.
  std::chrono::steady_clock::time_point started{};
};

class Communicator {
 public:
  // `groups[g]` lists the global ranks of group g, strictly ascending, each in
  // [0, num_ranks) (as ir::Program.groups). Throws CommError (kInvalidArgument).
  Communicator(int num_ranks, std::vector<std::vector<int>> groups, CommunicatorOptions options = {});
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int num_ranks() const;
  int num_groups() const;
  const std::vector<int>& group_ranks(int group) const;
  const CommunicatorOptions& options() const;

  // Collectives, called by every member `rank` of `group`. Buffer conventions
  // are nccl-tests' (program.proto): all_reduce and broadcast work in place on
  // the whole buffer; all_gather: output = group size × input (input may be
  // the member's own block of output); reduce_scatter: input = group size ×
  // output (output may be the member's own block of input); all_to_all: input
  // and output the same size, a multiple of the group size, block j of the
  // input goes to member j (no overlap allowed); reduce: the sum of every
  // member's input lands in the root's output (same size as input; ignored on
  // other members, may be empty). `root` is a global rank. Sums are float sums
  // in ring order. `label` (e.g. "stream tp_comm op 12") appears in reports.
  CallStats all_reduce(int rank, int group, std::span<float> buffer, std::string_view label = {});
  CallStats all_gather(int rank, int group, std::span<const float> input, std::span<float> output,
                       std::string_view label = {});
  CallStats reduce_scatter(int rank, int group, std::span<const float> input, std::span<float> output,
                           std::string_view label = {});
  CallStats all_to_all(int rank, int group, std::span<const float> input, std::span<float> output,
                       std::string_view label = {});
  CallStats broadcast(int rank, int group, int root, std::span<float> buffer, std::string_view label = {});
  CallStats reduce(int rank, int group, int root, std::span<const float> input, std::span<float> output,
                   std::string_view label = {});

  // Point-to-point rendezvous. `channel` >= 0.
  CallStats send(int src, int dst, int channel, std::int64_t tag, std::span<const float> data,
                 std::string_view label = {});
  CallStats recv(int dst, int src, int channel, std::int64_t tag, std::span<float> out,
                 std::string_view label = {});

  // Wakes every waiting call and makes it, and every later call, throw
  // CommError (kAborted) carrying `reason`. The first reason sticks. Calls that
  // are already moving data finish first (their peers' buffers are in use).
  void abort(const std::string& reason);
  bool aborted() const;
  std::string abort_reason() const;  // empty unless aborted

  // Which ranks wait in which call right now (the body of a deadlock report).
  std::string waiting_report() const;
  int waiting_calls() const;  // calls currently inside the communicator

  // Bytes copied between ranks' buffers by all calls so far.
  std::int64_t total_bytes_moved() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lacuna::runtime
