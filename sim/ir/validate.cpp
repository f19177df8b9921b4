#include "sim/ir/validate.h"

// validate_program: every index the engine dereferences and every quantity it
// adds up is range-checked here, so that a corrupt or hand-edited program.pb is
// rejected with a message instead of crashing or hanging the simulator.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sim/core/error.h"

namespace lacuna::ir {
namespace {

// Limits that keep per-rank runtime state bounded (a corrupt num_events of 2^31
// would otherwise allocate gigabytes per rank).
constexpr int32_t kMaxStreamsPerClass = 1024;
constexpr int32_t kMaxEventsPerClass = 1 << 20;
constexpr int64_t kMaxEventCountersTotal = int64_t{1} << 28;
constexpr double kMaxComputeTimeScale = 1e6;
// Bounds that keep every derived sum inside int64 (docs/reliability.md): no
// op lasts longer than 10^15 ns (11.6 days), moves or touches more than
// 10^18 bytes, runs more than 10^21 FLOP (11.6 days at 1 PFLOP/s), or
// allocates more than 2^50 bytes (1 PiB) at once; a class's memory
// deltas, in absolute value, and its baseline stay below 2^62 bytes, so no
// running total over them can overflow.
constexpr int64_t kMaxOpNs = 1'000'000'000'000'000;
constexpr double kMaxOpBytes = 1e18;
constexpr int64_t kMaxOpBytesInt = 1'000'000'000'000'000'000;
constexpr double kMaxOpFlops = 1e21;
constexpr int64_t kMaxDeltaBytes = int64_t{1} << 50;
constexpr int64_t kMaxClassMemoryBytes = int64_t{1} << 62;

class Checker {
 public:
  Checker(const ir::Program& p, const std::string& source) : p_(p), source_(source) {}

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    SourceLocation where;
    where.file = source_;
    where.field = field;
    throw Error(where, what);
  }

  void run() {
    const int num_ranks = p_.ranks_size();
    // An empty message parses from many byte strings (a truncated or foreign
    // file): a program must describe at least one rank.
    if (num_ranks == 0) fail("ranks", "the program has no ranks (not a lacuna program, or truncated)");
    if (p_.info().num_ranks() != 0 && p_.info().num_ranks() != num_ranks) {
      fail("info.num_ranks", "says " + std::to_string(p_.info().num_ranks()) + " ranks but the program has " +
                                 std::to_string(num_ranks) + " rank bindings");
    }
    check_groups();
    std::vector<ClassUse> uses(p_.classes_size());
    for (int c = 0; c < p_.classes_size(); ++c) uses[c] = check_class(c);
    int64_t counters = 0;
    for (int r = 0; r < num_ranks; ++r) {
      check_rank(r, uses);
      counters += p_.classes(p_.ranks(r).class_id()).num_events();
    }
    if (counters > kMaxEventCountersTotal) {
      fail("classes", "the ranks need " + std::to_string(counters) + " event counters in all (at most " +
                          std::to_string(kMaxEventCountersTotal) + ")");
    }
  }

 private:
  // Which slots a class's ops use: a rank of that class must bind them.
  struct ClassUse {
    std::vector<std::string> group_slot_user;  // field path of the first op using each slot; empty if unused
    std::vector<std::string> peer_slot_user;
  };

  std::string rank_count() const { return "(program has " + std::to_string(p_.ranks_size()) + " ranks)"; }

  void check_groups() {
    for (int g = 0; g < p_.groups_size(); ++g) {
      const auto& group = p_.groups(g);
      const std::string f = "groups[" + std::to_string(g) + "]";
      for (int i = 0; i < group.ranks_size(); ++i) {
        const int32_t r = group.ranks(i);
        if (r < 0 || r >= p_.ranks_size()) {
          fail(f + ".ranks[" + std::to_string(i) + "]", "rank " + std::to_string(r) + " out of range " + rank_count());
        }
        if (i > 0 && r <= group.ranks(i - 1)) {
          fail(f + ".ranks[" + std::to_string(i) + "]", "ranks must be strictly ascending (rank " + std::to_string(r) +
                                                            " follows rank " + std::to_string(group.ranks(i - 1)) + ")");
        }
      }
    }
  }

  void check_non_negative(const std::string& field, int64_t v) const {
    if (v < 0) fail(field, "must be >= 0, got " + std::to_string(v));
  }
  void check_non_negative(const std::string& field, double v) const {
    if (!std::isfinite(v) || v < 0) fail(field, "must be finite and >= 0, got " + std::to_string(v));
  }
  template <class T>
  void check_range(const std::string& field, T v, T max, const char* what) const {
    check_non_negative(field, v);
    if (v > max) fail(field, fmt::format("{} is beyond what one op can {} (at most {})", v, what, max));
  }

  void check_slot(const std::string& field, int32_t slot, int num_slots, const char* what,
                  std::vector<std::string>& users) const {
    if (slot < 0 || slot >= num_slots) {
      fail(field, std::string(what) + " " + std::to_string(slot) + " out of range (program has " +
                      std::to_string(num_slots) + " " + what + "s)");
    }
    if (users[slot].empty()) users[slot] = field;
  }

  ClassUse check_class(int c) {
    const auto& cls = p_.classes(c);
    const std::string f = "classes[" + std::to_string(c) + "]";
    ClassUse use;
    use.group_slot_user.resize(p_.group_slots_size());
    use.peer_slot_user.resize(p_.peer_slots_size());
    if (cls.num_events() < 0 || cls.num_events() > kMaxEventsPerClass) {
      fail(f + ".num_events", "must be in [0, " + std::to_string(kMaxEventsPerClass) + "], got " +
                                  std::to_string(cls.num_events()));
    }
    if (cls.streams_size() > kMaxStreamsPerClass) {
      fail(f + ".streams", std::to_string(cls.streams_size()) + " streams (at most " +
                               std::to_string(kMaxStreamsPerClass) + ")");
    }
    int64_t memory = 0;  // Σ |delta| + baseline, checked against kMaxClassMemoryBytes
    const auto add_memory = [&](const std::string& field, int64_t v) {
      if (v < -kMaxDeltaBytes || v > kMaxDeltaBytes)
        fail(field, fmt::format("{} bytes is beyond what one GPU can allocate at once (at most 2^50)", v));
      memory += v < 0 ? -v : v;
      if (memory > kMaxClassMemoryBytes)
        fail(field, "the class's memory baseline and deltas add up to more than 2^62 bytes");
    };
    const auto& m = cls.memory();
    add_memory(f + ".memory.weights_bytes", m.weights_bytes());
    add_memory(f + ".memory.gradients_bytes", m.gradients_bytes());
    add_memory(f + ".memory.optimizer_bytes", m.optimizer_bytes());
    add_memory(f + ".memory.other_bytes", m.other_bytes());
    for (int s = 0; s < cls.streams_size(); ++s) {
      const auto& stream = cls.streams(s);
      for (int o = 0; o < stream.ops_size(); ++o) {
        const std::string at = f + ".streams[" + std::to_string(s) + "].ops[" + std::to_string(o) + "]";
        check_op(at, stream.ops(o), cls.num_events(), use);
        if (stream.ops(o).has_compute())
          add_memory(at + ".compute.memory_delta_bytes", stream.ops(o).compute().memory_delta_bytes());
      }
    }
    return use;
  }

  void check_op(const std::string& f, const ir::Op& op, int32_t num_events, ClassUse& use) const {
    if (op.host_ns() < 0) {
      fail(f + ".host_ns", "must be >= 0 (the host's time to issue the op), got " + std::to_string(op.host_ns()));
    }
    check_range(f + ".host_ns", op.host_ns(), kMaxOpNs, "last");
    switch (op.kind_case()) {
      case ir::Op::kCompute: {
        const auto& c = op.compute();
        check_range(f + ".compute.flops", c.flops(), kMaxOpFlops, "run");
        check_range(f + ".compute.bytes", c.bytes(), kMaxOpBytes, "touch");
        check_range(f + ".compute.fixed_duration_ns", c.fixed_duration_ns(), kMaxOpNs, "last");
        if (!ir::OpClass_IsValid(c.op_class())) fail(f + ".compute.op_class", "unknown op class " + std::to_string(c.op_class()));
        for (int i = 0; i < c.shape_size(); ++i) {
          check_non_negative(f + ".compute.shape[" + std::to_string(i) + "]", c.shape(i));
        }
        return;
      }
      case ir::Op::kCollective: {
        const auto& c = op.collective();
        if (c.kind() == ir::COLLECTIVE_UNSPECIFIED || !ir::CollectiveKind_IsValid(c.kind())) {
          fail(f + ".collective.kind", "unknown collective kind " + std::to_string(c.kind()));
        }
        check_slot(f + ".collective.group_slot", c.group_slot(), p_.group_slots_size(), "group slot",
                   use.group_slot_user);
        check_range(f + ".collective.bytes", c.bytes(), kMaxOpBytesInt, "move");
        check_range(f + ".collective.fixed_duration_ns", c.fixed_duration_ns(), kMaxOpNs, "last");
        return;
      }
      case ir::Op::kSend: {
        const auto& s = op.send();
        check_slot(f + ".send.peer_slot", s.peer_slot(), p_.peer_slots_size(), "peer slot", use.peer_slot_user);
        check_range(f + ".send.bytes", s.bytes(), kMaxOpBytesInt, "move");
        check_non_negative(f + ".send.channel", int64_t{s.channel()});
        check_range(f + ".send.fixed_duration_ns", s.fixed_duration_ns(), kMaxOpNs, "last");
        return;
      }
      case ir::Op::kRecv: {
        const auto& r = op.recv();
        check_slot(f + ".recv.peer_slot", r.peer_slot(), p_.peer_slots_size(), "peer slot", use.peer_slot_user);
        check_range(f + ".recv.bytes", r.bytes(), kMaxOpBytesInt, "move");
        check_non_negative(f + ".recv.channel", int64_t{r.channel()});
        return;
      }
      case ir::Op::kRecord:
        check_event(f + ".record.event", op.record().event(), num_events);
        return;
      case ir::Op::kWait:
        check_event(f + ".wait.event", op.wait().event(), num_events);
        check_non_negative(f + ".wait.value", op.wait().value());
        return;
      case ir::Op::KIND_NOT_SET:
        fail(f, "op has no kind (set one of compute, collective, send, recv, record, wait)");
    }
    fail(f, "op has an unknown kind");
  }

  void check_event(const std::string& f, int32_t event, int32_t num_events) const {
    if (event < 0 || event >= num_events) {
      fail(f, "event " + std::to_string(event) + " out of range (class has " + std::to_string(num_events) + " events)");
    }
  }

  void check_rank(int r, const std::vector<ClassUse>& uses) const {
    const auto& b = p_.ranks(r);
    const std::string f = "ranks[" + std::to_string(r) + "]";
    if (b.class_id() < 0 || b.class_id() >= p_.classes_size()) {
      fail(f + ".class_id", "class " + std::to_string(b.class_id()) + " out of range (program has " +
                                std::to_string(p_.classes_size()) + " classes)");
    }
    if (b.group_size() > p_.group_slots_size()) {
      fail(f + ".group", std::to_string(b.group_size()) + " entries but the program has " +
                             std::to_string(p_.group_slots_size()) + " group slots");
    }
    if (b.peer_size() > p_.peer_slots_size()) {
      fail(f + ".peer", std::to_string(b.peer_size()) + " entries but the program has " +
                            std::to_string(p_.peer_slots_size()) + " peer slots");
    }
    for (int s = 0; s < b.group_size(); ++s) {
      const int32_t g = b.group(s);
      const std::string gf = f + ".group[" + std::to_string(s) + "]";
      if (g == -1) continue;
      if (g < 0 || g >= p_.groups_size()) {
        fail(gf, "group " + std::to_string(g) + " out of range (program has " + std::to_string(p_.groups_size()) +
                     " groups)");
      }
      const auto& members = p_.groups(g).ranks();
      if (!std::binary_search(members.begin(), members.end(), r)) {
        fail(gf, "rank " + std::to_string(r) + " is bound to group " + std::to_string(g) + " but is not a member of it");
      }
    }
    for (int s = 0; s < b.peer_size(); ++s) {
      const int32_t peer = b.peer(s);
      if (peer != -1 && (peer < 0 || peer >= p_.ranks_size())) {
        fail(f + ".peer[" + std::to_string(s) + "]", "rank " + std::to_string(peer) + " out of range " + rank_count());
      }
    }
    if (b.has_compute_time_scale()) {
      const double k = b.compute_time_scale();
      if (!std::isfinite(k) || k <= 0 || k > kMaxComputeTimeScale) {
        fail(f + ".compute_time_scale", "must be in (0, " + std::to_string(static_cast<int>(kMaxComputeTimeScale)) +
                                            "], got " + std::to_string(k));
      }
    }
    if (b.node() < 0) fail(f + ".node", "must be >= 0, got " + std::to_string(b.node()));
    const ClassUse& use = uses[b.class_id()];
    for (size_t s = 0; s < use.group_slot_user.size(); ++s) {
      if (use.group_slot_user[s].empty()) continue;
      if (static_cast<int>(s) >= b.group_size() || b.group(static_cast<int>(s)) == -1) {
        fail(f + ".group[" + std::to_string(s) + "]", "no group bound, but class " + std::to_string(b.class_id()) +
                                                          " uses group slot " + std::to_string(s) + " (" +
                                                          use.group_slot_user[s] + ")");
      }
    }
    for (size_t s = 0; s < use.peer_slot_user.size(); ++s) {
      if (use.peer_slot_user[s].empty()) continue;
      if (static_cast<int>(s) >= b.peer_size() || b.peer(static_cast<int>(s)) == -1) {
        fail(f + ".peer[" + std::to_string(s) + "]", "no peer bound, but class " + std::to_string(b.class_id()) +
                                                         " uses peer slot " + std::to_string(s) + " (" +
                                                         use.peer_slot_user[s] + ")");
      }
    }
  }

  const ir::Program& p_;
  const std::string& source_;
};

}  // namespace

void validate_program(const Program& program, const std::string& source) { Checker(program, source).run(); }

}  // namespace lacuna::ir
