#include "sim/ir/bound_program.h"

#include <algorithm>

#include "sim/core/error.h"

namespace lacuna::ir {

std::string describe(const P2pKey& key) {
  return "rank " + std::to_string(key.src) + " -> rank " + std::to_string(key.dst) + ", channel " +
         std::to_string(key.channel);
}

int32_t BoundProgram::group(int32_t rank, int32_t slot) const {
  const RankBinding& b = program_->ranks(rank);
  return slot >= 0 && slot < b.group_size() ? b.group(slot) : -1;
}

FlatBindings::FlatBindings(const Program& program) {
  class_ids_.reserve(static_cast<size_t>(program.ranks_size()));
  for (const RankBinding& b : program.ranks()) {
    class_ids_.push_back(b.class_id());
    group_slots_ = std::max(group_slots_, b.group_size());
    peer_slots_ = std::max(peer_slots_, b.peer_size());
  }
  const int32_t ranks = program.ranks_size();
  groups_.assign(index(ranks, 0, group_slots_), -1);
  peers_.assign(index(ranks, 0, peer_slots_), -1);
  for (int32_t r = 0; r < ranks; ++r) {
    const RankBinding& b = program.ranks(r);
    std::copy(b.group().begin(), b.group().end(), groups_.begin() + static_cast<std::ptrdiff_t>(index(r, 0, group_slots_)));
    std::copy(b.peer().begin(), b.peer().end(), peers_.begin() + static_cast<std::ptrdiff_t>(index(r, 0, peer_slots_)));
  }
}

int32_t BoundProgram::peer(int32_t rank, int32_t slot) const {
  const RankBinding& b = program_->ranks(rank);
  return slot >= 0 && slot < b.peer_size() ? b.peer(slot) : -1;
}

std::span<const int32_t> BoundProgram::members(int32_t group) const {
  const auto& r = program_->groups(group).ranks();
  return {r.data(), static_cast<size_t>(r.size())};
}

int32_t BoundProgram::member_index(int32_t group, int32_t rank) const {
  const auto m = members(group);
  const auto it = std::lower_bound(m.begin(), m.end(), rank);
  return it != m.end() && *it == rank ? static_cast<int32_t>(it - m.begin()) : -1;
}

P2pKey BoundProgram::p2p_key(int32_t rank, const Op& op) const {
  switch (op.kind_case()) {
    case Op::kSend: return p2p_key(rank, true, op.send().peer_slot(), op.send().channel());
    case Op::kRecv: return p2p_key(rank, false, op.recv().peer_slot(), op.recv().channel());
    default:
      throw InternalError("p2p_key of an op that is neither a send nor a recv (rank " + std::to_string(rank) + ")");
  }
}

}  // namespace lacuna::ir
