// Helpers for the engine's tests and benchmarks: terse construction of small
// Programs through the protobuf API, a cost model whose answers are closed
// forms, and an observer that records everything.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "sim/cost/cost_model.h"
#include "sim/engine/observer.h"
#include "sim/proto/program.pb.h"

namespace lacuna::engine::testing {

// compute = flops ns (capped); collective = bytes + 1000·size + 100000·(nodes-1)
// + 7·max_ranks_per_node + kind; p2p = bytes/10 + (same node ? 0 : 5000).
// Counts how often it is asked, to check the engine's memoization.
class ClosedFormCost : public cost::CostModel {
 public:
  std::string_view name() const override { return "closed-form test cost"; }
  TimeNs compute(const ir::Compute& op) const override {
    ++compute_calls;
    return TimeNs(static_cast<int64_t>(std::min(op.flops(), 1e12)));
  }
  TimeNs collective(ir::CollectiveKind kind, int64_t bytes, const cost::GroupShape& g) const override {
    ++collective_calls;
    return TimeNs(std::min<int64_t>(bytes, int64_t{1} << 40) + 1000 * g.size + 100000 * (g.nodes - 1) +
                  7 * g.max_ranks_per_node + static_cast<int64_t>(kind));
  }
  TimeNs p2p(int64_t bytes, bool same_node) const override {
    ++p2p_calls;
    return TimeNs(std::min<int64_t>(bytes, int64_t{1} << 40) / 10 + (same_node ? 0 : 5000));
  }
  mutable int compute_calls = 0;
  mutable int collective_calls = 0;
  mutable int p2p_calls = 0;
};

inline ir::Op& add_compute(ir::Stream* s, int64_t fixed_ns, double flops = 0) {
  ir::Op* op = s->add_ops();
  op->mutable_compute()->set_op_class(ir::GEMM);
  op->mutable_compute()->set_fixed_duration_ns(fixed_ns);
  op->mutable_compute()->set_flops(flops);
  return *op;
}
inline ir::Op& add_collective(ir::Stream* s, ir::CollectiveKind kind, int32_t group_slot, int64_t bytes,
                              int64_t fixed_ns = 0) {
  ir::Op* op = s->add_ops();
  auto* c = op->mutable_collective();
  c->set_kind(kind);
  c->set_group_slot(group_slot);
  c->set_bytes(bytes);
  c->set_fixed_duration_ns(fixed_ns);
  return *op;
}
inline ir::Op& add_send(ir::Stream* s, int32_t peer_slot, int64_t bytes, int32_t channel, int64_t tag,
                        int64_t fixed_ns = 0) {
  ir::Op* op = s->add_ops();
  auto* p = op->mutable_send();
  p->set_peer_slot(peer_slot);
  p->set_bytes(bytes);
  p->set_channel(channel);
  p->set_tag(tag);
  p->set_fixed_duration_ns(fixed_ns);
  return *op;
}
inline ir::Op& add_recv(ir::Stream* s, int32_t peer_slot, int64_t bytes, int32_t channel, int64_t tag) {
  ir::Op* op = s->add_ops();
  auto* p = op->mutable_recv();
  p->set_peer_slot(peer_slot);
  p->set_bytes(bytes);
  p->set_channel(channel);
  p->set_tag(tag);
  return *op;
}
inline ir::Op& add_record(ir::Stream* s, int32_t event) {
  ir::Op* op = s->add_ops();
  op->mutable_record()->set_event(event);
  return *op;
}
inline ir::Op& add_wait(ir::Stream* s, int32_t event, int64_t value) {
  ir::Op* op = s->add_ops();
  op->mutable_wait()->set_event(event);
  op->mutable_wait()->set_value(value);
  return *op;
}

inline ir::RankClass* add_class(ir::Program& p, const std::string& name, int32_t num_events,
                                std::initializer_list<const char*> streams) {
  ir::RankClass* c = p.add_classes();
  c->set_name(name);
  c->set_num_events(num_events);
  for (const char* s : streams) c->add_streams()->set_name(s);
  return c;
}
inline int32_t add_group(ir::Program& p, ir::GroupKind kind, std::vector<int32_t> ranks) {
  ir::Group* g = p.add_groups();
  g->set_kind(kind);
  std::sort(ranks.begin(), ranks.end());
  for (int32_t r : ranks) g->add_ranks(r);
  return p.groups_size() - 1;
}
inline ir::RankBinding* add_rank(ir::Program& p, int32_t class_id, std::vector<int32_t> groups = {},
                                 std::vector<int32_t> peers = {}, int32_t node = 0,
                                 std::optional<double> scale = std::nullopt) {
  // The IR declares a slot for every binding (ir::validate_program); tests
  // that bind more than the program declares get generic slots.
  while (p.group_slots_size() < static_cast<int>(groups.size()))
    p.add_group_slots()->set_name("g" + std::to_string(p.group_slots_size()));
  while (p.peer_slots_size() < static_cast<int>(peers.size()))
    p.add_peer_slots()->set_name("peer" + std::to_string(p.peer_slots_size()));
  ir::RankBinding* b = p.add_ranks();
  b->set_class_id(class_id);
  for (int32_t g : groups) b->add_group(g);
  for (int32_t r : peers) b->add_peer(r);
  b->set_node(node);
  if (scale) b->set_compute_time_scale(*scale);
  return b;
}

// Random host costs on every op of every class: host_ns uniform in
// [0, max_ns], host_sync on about one op in `sync_one_in` (0: never).
// Deterministic in `seed`, and per class, so ranks of a class stay identical.
inline void add_random_host_costs(ir::Program& p, uint64_t seed, int64_t max_ns, int sync_one_in) {
  std::mt19937_64 rng(seed);
  for (ir::RankClass& cls : *p.mutable_classes()) {
    for (ir::Stream& stream : *cls.mutable_streams()) {
      for (ir::Op& op : *stream.mutable_ops()) {
        op.set_host_ns(static_cast<int64_t>(rng() % static_cast<uint64_t>(max_ns + 1)));
        op.set_host_sync(sync_one_in > 0 && rng() % static_cast<uint64_t>(sync_one_in) == 0);
      }
    }
  }
}

struct RecordedWait {
  OpSpan span;
  WaitCause cause;
};

struct RecordedCollective {
  int32_t group = 0;
  uint64_t seq = 0;
  std::vector<OpSpan> members;  // arrival order
};

class RecordingObserver : public Observer {
 public:
  void on_run_begin(const RunInfo& info) override {
    ++runs;
    simulated = info.simulated_ranks;
    represents = info.represents;
    compute_slots = info.compute_slots;
  }
  void on_op_end(const OpSpan& span) override { spans.push_back(span); }
  void on_wait_end(const OpSpan& span, const WaitCause& cause) override { waits.push_back({span, cause}); }
  void on_transfer(const OpSpan& send, const OpSpan& recv) override { transfers.emplace_back(send, recv); }
  void on_collective(const CollectiveSpan& c) override {
    collectives.push_back({c.group, c.seq, {c.members.begin(), c.members.end()}});
  }
  void on_run_end(TimeNs end) override { run_end = end; }

  const OpSpan* find(int32_t rank, int32_t stream, int32_t op) const {
    for (const OpSpan& s : spans) {
      if (s.rank == rank && s.stream == stream && s.op == op) return &s;
    }
    return nullptr;
  }

  int runs = 0;
  std::vector<int32_t> simulated;
  std::vector<std::vector<int32_t>> represents;
  std::vector<OpSpan> spans;
  std::vector<RecordedWait> waits;
  std::vector<std::pair<OpSpan, OpSpan>> transfers;
  std::vector<RecordedCollective> collectives;
  int32_t compute_slots = -1;
  std::optional<TimeNs> run_end;
};

}  // namespace lacuna::engine::testing
