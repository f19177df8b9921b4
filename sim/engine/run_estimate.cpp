#include "sim/engine/run_estimate.h"

#include <algorithm>
#include <span>
#include <tuple>
#include <vector>

#include "sim/cost/group_shape.h"
#include "sim/engine/fold.h"
#include "sim/engine/simulator_impl.h"
#include "sim/ir/bound_program.h"

namespace lacuna::engine {

namespace {

// Per class, what one of its ranks holds and schedules per iteration.
struct ClassCounts {
  int64_t streams = 0;
  int64_t ops = 0;
  int64_t compute = 0;
  int64_t sends = 0;
  int64_t host = 0;       // ops with host costs (a kHostIssued each, at most)
  int64_t endpoints = 0;  // distinct (peer slot, channel, direction)
  int64_t events = 0;     // Program events (record/wait counters)
  std::vector<int64_t> collectives_per_slot;
};

ClassCounts count_class(const ir::RankClass& cls, int num_slots) {
  ClassCounts c;
  c.streams = cls.streams_size();
  c.events = std::max(0, cls.num_events());
  c.collectives_per_slot.assign(static_cast<size_t>(num_slots), 0);
  std::vector<std::tuple<int32_t, int32_t, bool>> endpoints;
  for (const ir::Stream& s : cls.streams()) {
    c.ops += s.ops_size();
    for (const ir::Op& op : s.ops()) {
      if (op.host_ns() > 0 || op.host_sync()) ++c.host;
      switch (op.kind_case()) {
        case ir::Op::kCompute:
          ++c.compute;
          break;
        case ir::Op::kCollective: {
          const int32_t slot = op.collective().group_slot();
          if (slot >= 0 && slot < num_slots) ++c.collectives_per_slot[static_cast<size_t>(slot)];
          break;
        }
        case ir::Op::kSend:
          ++c.sends;
          endpoints.emplace_back(op.send().peer_slot(), op.send().channel(), true);
          break;
        case ir::Op::kRecv:
          endpoints.emplace_back(op.recv().peer_slot(), op.recv().channel(), false);
          break;
        default:
          break;
      }
    }
  }
  std::sort(endpoints.begin(), endpoints.end());
  c.endpoints = std::unique(endpoints.begin(), endpoints.end()) - endpoints.begin();
  return c;
}

// Bytes of a std::map node holding (P2pKey, uint32_t): the red-black header
// (three pointers and the colour, 32 bytes on LP64) plus the value.
constexpr int64_t kMapNodeBytes = 32 + static_cast<int64_t>(sizeof(std::pair<const ir::P2pKey, uint32_t>));
// A pending event: its key in a bucket (and once in the refill scratch), its
// slot's sequence number and payload, and its free-list entry.
constexpr int64_t kPendingEventBytes = 2 * static_cast<int64_t>(sizeof(detail::EventKey)) +
                                       static_cast<int64_t>(sizeof(uint64_t) + sizeof(EngineEvent) + sizeof(uint32_t));

}  // namespace

EngineEstimate estimate_engine(const ir::Program& p, const SimulationOptions& options) {
  EngineEstimate e;
  e.all_ranks = p.ranks_size();
  const SimulatedSet set = plan_simulated_ranks(p, options.fold);
  e.simulated_ranks = static_cast<int64_t>(set.ranks.size());
  for (const auto& r : set.represents) e.represented_ranks += static_cast<int64_t>(r.size());
  const int num_slots = p.group_slots_size();
  const ir::BoundProgram bound(p);

  std::vector<int32_t> simulated_members(static_cast<size_t>(p.groups_size()), 0);
  {
    std::vector<bool> simulated(static_cast<size_t>(p.ranks_size()), false);
    for (int32_t r : set.ranks) simulated[static_cast<size_t>(r)] = true;
    for (int g = 0; g < p.groups_size(); ++g) {
      for (int32_t r : p.groups(g).ranks()) {
        if (r >= 0 && r < p.ranks_size() && simulated[static_cast<size_t>(r)]) ++simulated_members[static_cast<size_t>(g)];
      }
    }
  }

  std::vector<ClassCounts> counts(static_cast<size_t>(p.classes_size()));
  std::vector<bool> counted(counts.size(), false);
  int64_t flat_ops = 0;  // ops of the classes the run flattens
  int64_t flat_collectives = 0;
  int64_t endpoints = 0, event_counters = 0;
  uint64_t ops = 0, events = 0, host_events = 0;
  // Collective instances per group member, summed as exact fractions:
  // per group, the collectives its simulated members issue in it; each
  // instance is one event however many members share it.
  std::vector<int64_t> issued_in_group(static_cast<size_t>(p.groups_size()), 0);
  for (int32_t r : set.ranks) {
    const int32_t c = p.ranks(r).class_id();
    if (!counted[static_cast<size_t>(c)]) {
      counts[static_cast<size_t>(c)] = count_class(p.classes(c), num_slots);
      counted[static_cast<size_t>(c)] = true;
      flat_ops += counts[static_cast<size_t>(c)].ops;
      for (int64_t n : counts[static_cast<size_t>(c)].collectives_per_slot) flat_collectives += n;
    }
    const ClassCounts& cc = counts[static_cast<size_t>(c)];
    e.streams += cc.streams;
    ops += static_cast<uint64_t>(cc.ops);
    events += static_cast<uint64_t>(cc.compute + cc.sends);
    host_events += static_cast<uint64_t>(cc.host);
    endpoints += cc.endpoints;
    event_counters += cc.events;
    for (int s = 0; s < num_slots; ++s) {
      const int64_t n = cc.collectives_per_slot[static_cast<size_t>(s)];
      if (n == 0) continue;
      const int32_t g = bound.group(r, s);
      if (g >= 0) issued_in_group[static_cast<size_t>(g)] += n;
    }
  }
  // Two slots naming one group (dp and dp_cp when cp = 1) issue into the
  // same counter, so the per-group sums already merge them.
  for (size_t g = 0; g < issued_in_group.size(); ++g) {
    if (simulated_members[g] > 0) {
      events += static_cast<uint64_t>((issued_in_group[g] + simulated_members[g] - 1) / simulated_members[g]);
    }
  }
  const auto iterations = static_cast<uint64_t>(std::max(1, options.iterations));
  e.ops = ops * iterations;
  e.events = events * iterations;
  e.host_events = host_events * iterations;

  // Bytes, at the engine's own record sizes (simulator_impl.h).
  const int64_t sim = e.simulated_ranks;
  const int64_t groups = p.groups_size();
  int64_t member_entries = 0;
  for (int32_t m : simulated_members) member_entries += m;
  // A send endpoint and its peer's recv share a mailbox when both ranks are
  // simulated; one per endpoint bounds it for a folded run.
  const int64_t mailboxes = endpoints;
  // Distinct group shapes, as the Simulator keys its collective-duration cache.
  std::vector<cost::GroupShape> shapes;
  for (int g = 0; g < p.groups_size(); ++g) {
    const auto& members = p.groups(g).ranks();
    const cost::GroupShape shape =
        cost::shape_of_ranks(p, std::span<const int32_t>(members.data(), static_cast<size_t>(members.size())));
    if (std::find(shapes.begin(), shapes.end(), shape) == shapes.end()) shapes.push_back(shape);
  }
  int64_t bytes = 0;
  bytes += sim * static_cast<int64_t>(sizeof(SimRank) + sizeof(uint64_t));             // ranks, wait_mask
  bytes += sim * num_slots * static_cast<int64_t>(2 * sizeof(int32_t) + sizeof(uint64_t));  // slot maps, issue counters
  bytes += event_counters * static_cast<int64_t>(sizeof(int64_t));
  bytes += e.streams * static_cast<int64_t>(sizeof(StreamState) + 2 * sizeof(TimeNs) + sizeof(uint32_t));
  bytes += e.streams * kPendingEventBytes;  // at most one pending completion per stream
  bytes += endpoints * static_cast<int64_t>(sizeof(uint32_t));
  bytes += mailboxes * (static_cast<int64_t>(sizeof(Mailbox)) + kMapNodeBytes);
  // Per group its info, runtime and (while a collective is open) one instance
  // with a waiter per member, plus the instance's pending completion.
  bytes += groups * static_cast<int64_t>(sizeof(GroupInfo) + sizeof(GroupRuntime) + sizeof(CollectiveInstance) +
                                         sizeof(uint32_t)) +
           groups * kPendingEventBytes;
  bytes += member_entries * static_cast<int64_t>(sizeof(std::pair<uint32_t, int32_t>) + sizeof(uint32_t));
  bytes += mailboxes * static_cast<int64_t>(sizeof(Transfer)) + mailboxes * kPendingEventBytes;
  bytes += flat_ops * static_cast<int64_t>(sizeof(FlatOp) + sizeof(const ir::Op*));
  bytes += flat_collectives * static_cast<int64_t>(shapes.size()) * static_cast<int64_t>(sizeof(int64_t));
  bytes += static_cast<int64_t>(p.ranks_size()) * static_cast<int64_t>(sizeof(int32_t));  // the rank → simulated index map
  e.state = Bytes(bytes);
  return e;
}

}  // namespace lacuna::engine
