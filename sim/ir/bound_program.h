// A program's slots resolved to concrete groups and ranks: the one reading
// of the IR's bindings that the simulator, the executor's plan, the
// communicator, the measured-span observer and the trace writer share.
//
// The view is thin: every query reads the program in O(1) (O(log group size)
// for member_index), nothing is copied, so binding a 10^6-rank program costs
// nothing. It assumes a program that passed ir::validate_program (slots,
// peers and groups in range, groups ascending); on such a program no query
// reads out of range.
#pragma once

#include <algorithm>
#include <compare>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "sim/proto/program.pb.h"

namespace lacuna::ir {

// Point-to-point transfers match in issue order per (source rank,
// destination rank, channel): the k-th send from src to dst on a channel
// pairs with the k-th recv at dst from src on that channel (program.proto,
// like NCCL's in-order p2p per communicator pair).
struct P2pKey {
  int32_t src = -1;
  int32_t dst = -1;
  int32_t channel = -1;
  auto operator<=>(const P2pKey&) const = default;
};

// "rank 3 -> rank 4, channel 0", for messages.
std::string describe(const P2pKey& key);

class BoundProgram {
 public:
  explicit BoundProgram(const Program& program) : program_(&program) {}

  const Program& program() const { return *program_; }
  int32_t num_ranks() const { return program_->ranks_size(); }

  int32_t class_id(int32_t rank) const { return program_->ranks(rank).class_id(); }
  const RankClass& rank_class(int32_t rank) const { return program_->classes(class_id(rank)); }
  const Op& op(int32_t rank, int32_t stream, int32_t op) const { return rank_class(rank).streams(stream).ops(op); }

  // The group a rank's group slot names; -1 when the rank binds none.
  int32_t group(int32_t rank, int32_t slot) const;
  // The rank a rank's peer slot names; -1 when the rank binds none.
  int32_t peer(int32_t rank, int32_t slot) const;

  // The members of a group, ascending global ranks.
  std::span<const int32_t> members(int32_t group) const;
  // A rank's position in a group's member list; -1 when it is not a member.
  int32_t member_index(int32_t group, int32_t rank) const;
  // The root of a broadcast or reduce on the group. The IR has no root
  // field: a rooted collective is rooted at the group's first (lowest) rank,
  // which is how the compiler emits them and how the executor runs them.
  int32_t root(int32_t group) const { return members(group).front(); }

  // The group a collective op of `rank` runs on.
  int32_t collective_group(int32_t rank, const Op& op) const { return group(rank, op.collective().group_slot()); }
  // The matching key of a send or recv op of `rank` (any other op: throws).
  P2pKey p2p_key(int32_t rank, const Op& op) const;
  // The same from a transfer end's fields, for consumers that flattened them.
  P2pKey p2p_key(int32_t rank, bool is_send, int32_t peer_slot, int32_t channel) const {
    const int32_t other = peer(rank, peer_slot);
    return is_send ? P2pKey{rank, other, channel} : P2pKey{other, rank, channel};
  }

 private:
  const Program* program_;
};

// Every rank's class, group and peer bindings copied into flat arrays, for the
// consumers that resolve a slot once per op over a whole run (the
// communication accounting: 9 M collective ends in a full GPT-3 3,072-GPU
// run). BoundProgram reads the RankBinding messages, which lie scattered on
// the heap; at that rate each read was a cache miss (9 % of the run, `perf`).
// Built in O(ranks × slots); answers exactly as BoundProgram.
class FlatBindings {
 public:
  explicit FlatBindings(const Program& program);
  int32_t class_id(int32_t rank) const { return class_ids_[static_cast<size_t>(rank)]; }
  int32_t group(int32_t rank, int32_t slot) const {
    return slot >= 0 && slot < group_slots_ ? groups_[index(rank, slot, group_slots_)] : -1;
  }
  int32_t peer(int32_t rank, int32_t slot) const {
    return slot >= 0 && slot < peer_slots_ ? peers_[index(rank, slot, peer_slots_)] : -1;
  }

 private:
  static size_t index(int32_t rank, int32_t slot, int32_t slots) {
    return static_cast<size_t>(rank) * static_cast<size_t>(slots) + static_cast<size_t>(slot);
  }
  int32_t group_slots_ = 0;  // the widest binding's
  int32_t peer_slots_ = 0;
  std::vector<int32_t> class_ids_;  // per rank
  std::vector<int32_t> groups_;  // rank-major, -1 where a rank binds fewer slots
  std::vector<int32_t> peers_;
};

// Pairs sends with recvs by the IR's rule: per P2pKey, the k-th send added
// with the k-th recv added. Add each side in its issue order. `T` is whatever
// a consumer keeps per transfer end (a pointer to its op, a duration).
template <class T>
class P2pMatching {
 public:
  void add_send(const P2pKey& key, T value) { ends_[key].sends.push_back(std::move(value)); }
  void add_recv(const P2pKey& key, T value) { ends_[key].recvs.push_back(std::move(value)); }

  // Calls fn(key, send, recv) for every matched pair, keys ascending and in
  // issue order within a key. Unmatched ends (a run that stopped early, or
  // ranks that were not all observed) are skipped.
  template <class Fn>
  void for_each_pair(Fn&& fn) const {
    for (const auto& [key, e] : ends_) {
      const size_t n = std::min(e.sends.size(), e.recvs.size());
      for (size_t k = 0; k < n; ++k) fn(key, e.sends[k], e.recvs[k]);
    }
  }
  // Counts of ends left without a partner, over every key.
  size_t unmatched() const {
    size_t n = 0;
    for (const auto& [key, e] : ends_) {
      n += std::max(e.sends.size(), e.recvs.size()) - std::min(e.sends.size(), e.recvs.size());
    }
    return n;
  }

 private:
  struct Ends {
    std::vector<T> sends, recvs;
  };
  std::map<P2pKey, Ends> ends_;
};

}  // namespace lacuna::ir
