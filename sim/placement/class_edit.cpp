#include "sim/placement/class_edit.h"

#include <algorithm>

#include "sim/core/error.h"

namespace lacuna::placement {

void splice(ir::Stream& stream, std::vector<Insertion> insertions) {
  const int32_t n = stream.ops_size();
  for (const auto& ins : insertions)
    if (ins.before < 0 || ins.before > n)
      throw Error("splice into stream '" + stream.name() + "': position " + std::to_string(ins.before) +
                  " out of range (stream has " + std::to_string(n) + " ops)");
  std::stable_sort(insertions.begin(), insertions.end(),
                   [](const Insertion& a, const Insertion& b) { return a.before < b.before; });
  google::protobuf::RepeatedPtrField<ir::Op> old;
  old.Swap(stream.mutable_ops());
  stream.mutable_ops()->Reserve(n);
  size_t next = 0;
  for (int32_t i = 0; i <= n; ++i) {
    for (; next < insertions.size() && insertions[next].before == i; ++next)
      for (auto& op : insertions[next].ops) *stream.add_ops() = std::move(op);
    if (i < n) *stream.add_ops() = std::move(*old.Mutable(i));
  }
}

int32_t add_stream(ir::RankClass& rank_class, const std::string& name, ir::StreamKind kind) {
  auto* s = rank_class.add_streams();
  s->set_name(name);
  s->set_kind(kind);
  return rank_class.streams_size() - 1;
}

int32_t add_event(ir::RankClass& rank_class) {
  const int32_t id = rank_class.num_events();
  rank_class.set_num_events(id + 1);
  return id;
}

int32_t find_stream(const ir::RankClass& rank_class, const std::string& name) {
  for (int32_t i = 0; i < rank_class.streams_size(); ++i)
    if (rank_class.streams(i).name() == name) return i;
  return -1;
}

int32_t add_group_slot(ir::Program& program, const std::string& name, ir::GroupKind kind) {
  auto* slot = program.add_group_slots();
  slot->set_name(name);
  slot->set_kind(kind);
  for (auto& r : *program.mutable_ranks()) r.add_group(-1);
  return program.group_slots_size() - 1;
}

int32_t add_peer_slot(ir::Program& program, const std::string& name) {
  program.add_peer_slots()->set_name(name);
  for (auto& r : *program.mutable_ranks()) r.add_peer(-1);
  return program.peer_slots_size() - 1;
}

int32_t intern_group(ir::Program& program, ir::GroupKind kind, const std::vector<int32_t>& ranks) {
  for (int32_t g = 0; g < program.groups_size(); ++g) {
    if (program.groups(g).kind() != kind) continue;
    const auto& existing = program.groups(g).ranks();
    if (std::equal(existing.begin(), existing.end(), ranks.begin(), ranks.end())) return g;
  }
  auto* g = program.add_groups();
  g->set_kind(kind);
  for (int32_t r : ranks) g->add_ranks(r);
  return program.groups_size() - 1;
}

}  // namespace lacuna::placement
