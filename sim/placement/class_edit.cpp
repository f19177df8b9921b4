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

// ---------------------------------------------------------------- ClassEditor

ClassEditor::ClassEditor(ir::RankClass& rank_class) : c_(rank_class) {
  compute_ = find_stream(c_, "compute");
  if (compute_ < 0) compute_ = add_stream(c_, "compute", ir::COMPUTE);
}

int32_t ClassEditor::stream(const std::string& name, ir::StreamKind kind) {
  const int32_t i = find_stream(c_, name);
  if (i >= 0) {
    if (c_.streams(i).kind() != kind)
      throw InternalError("ClassEditor: stream '" + name + "' of class " + c_.name() + " exists with kind " +
                          ir::StreamKind_Name(c_.streams(i).kind()) + ", wanted " + ir::StreamKind_Name(kind) +
                          " (internal)");
    return i;
  }
  return add_stream(c_, name, kind);
}

int32_t ClassEditor::event(const std::string& key) {
  auto it = events_.find(key);
  if (it != events_.end()) return it->second;
  const int32_t id = add_event(c_);
  events_.emplace(key, id);
  return id;
}

ir::Op* ClassEditor::add(int32_t stream, const compiler::OpContext& ctx) {
  ir::Op* op = nullptr;
  if (stream == compute_) {
    if (block_ == nullptr) throw InternalError("ClassEditor: no compute block set (internal)");
    op = &block_->emplace_back();
  } else {
    op = c_.mutable_streams(stream)->add_ops();
  }
  op->set_phase(ctx.phase);
  op->set_microbatch(ctx.microbatch);
  op->set_chunk(ctx.chunk);
  op->set_layer(ctx.layer);
  op->set_module(ctx.module);
  return op;
}

int64_t ClassEditor::record(int32_t stream, int32_t event, const compiler::OpContext& ctx) {
  add(stream, ctx)->mutable_record()->set_event(event);
  return ++counters_[event];
}

void ClassEditor::wait(int32_t stream, int32_t event, int64_t value, const compiler::OpContext& ctx) {
  auto* w = add(stream, ctx)->mutable_wait();
  w->set_event(event);
  w->set_value(value);
}

int64_t ClassEditor::handoff(int32_t from, int32_t to, const std::string& event_key, const compiler::OpContext& ctx) {
  const int32_t ev = event(event_key);
  const int64_t v = record(from, ev, ctx);
  wait(to, ev, v, ctx);
  return v;
}

ir::Op* add_collective(ClassEditor& ed, int32_t stream, const compiler::OpContext& ctx, ir::CollectiveKind kind, int32_t slot,
                       int64_t bytes) {
  ir::Op* op = ed.add(stream, ctx);
  auto* c = op->mutable_collective();
  c->set_kind(kind);
  c->set_group_slot(slot);
  c->set_bytes(bytes);
  return op;
}

ir::Op* add_send(ClassEditor& ed, int32_t stream, const compiler::OpContext& ctx, int32_t peer_slot, int64_t bytes, int32_t channel,
                 int64_t tag) {
  ir::Op* op = ed.add(stream, ctx);
  set_p2p(*op->mutable_send(), peer_slot, bytes, channel, tag);
  return op;
}

ir::Op* add_recv(ClassEditor& ed, int32_t stream, const compiler::OpContext& ctx, int32_t peer_slot, int64_t bytes, int32_t channel,
                 int64_t tag) {
  ir::Op* op = ed.add(stream, ctx);
  set_p2p(*op->mutable_recv(), peer_slot, bytes, channel, tag);
  return op;
}

}  // namespace lacuna::placement
