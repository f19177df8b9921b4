// Messages for programs that cannot run: deadlocks (what each stuck stream
// waits for) and mismatched communication (which two ops disagree).
#include <cstdio>
#include <string>

#include "sim/engine/simulator_impl.h"

namespace lacuna::engine {
namespace {

constexpr size_t kMaxListed = 20;
constexpr size_t kMaxMissingNamed = 4;

std::string format_ms(TimeNs t) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f ms", t.ms());
  return buf;
}

std::string times(int64_t n) { return std::to_string(n) + (n == 1 ? " time" : " times"); }

}  // namespace

std::string Simulator::Impl::where(uint32_t sid) const {
  const StreamState& st = streams[sid];
  const SimRank& rk = ranks[st.rank];
  return "rank " + std::to_string(rk.rank) + " stream " + classes[rk.cls].streams[st.local].name + " op " +
         std::to_string(st.cursor - st.begin) +
         (last_iteration > 0 ? " (iteration " + std::to_string(st.iteration) + ")" : "");
}

std::string Simulator::Impl::describe_group(int32_t g) const {
  const std::string kind = group_kind_name(program.groups(g).kind());
  return "group " + std::to_string(g) + (kind.empty() ? "" : " (" + kind + ")");
}

std::string Simulator::Impl::describe_p2p(uint32_t sid) const {
  const FlatOp& op = current_op(streams[sid]);
  const Mailbox& m = mailboxes[streams[sid].comm];
  const bool is_send = op.kind == OpKind::kSend;
  return std::string(is_send ? "send to rank " : "recv from rank ") + std::to_string(is_send ? m.key.dst : m.key.src) +
         " (channel " + std::to_string(m.key.channel) + ", tag " + std::to_string(op.tag) + ", " +
         std::to_string(op.value) + " bytes)";
}

BlockedOp Simulator::Impl::describe_blocked(uint32_t sid) const {
  const StreamState& st = streams[sid];
  const SimRank& rk = ranks[st.rank];
  const FlatOp& op = current_op(st);
  BlockedOp b;
  b.rank = rk.rank;
  b.stream = classes[rk.cls].streams[st.local].name;
  b.op = static_cast<int32_t>(st.cursor - st.begin);
  if (st.status == StreamStatus::kBlockedHost) {
    // Never part of a deadlock: its kHostIssued event is queued until it pops.
    b.description = "not yet issued by its host (due at t = " + format_ms(host_clock[sid]) +
                    "; engine bug: its wake-up event is always queued)";
    return b;
  }
  switch (op.kind) {
    case OpKind::kWait:
      b.description = "wait event " + std::to_string(op.slot) + " >= " + std::to_string(wait_target(st, op)) + " (recorded " +
                      times(event_counts[rk.event_base + op.slot]) + ")";
      break;
    case OpKind::kCollective: {
      const CollectiveInstance& in = instances[st.comm];
      const GroupInfo& gi = groups[in.group];
      std::string missing;
      size_t named = 0;
      size_t absent = 0;
      for (const auto& [member, counter] : gi.members) {
        const uint64_t issued = counter >= 0 ? issue_counts[counter] : 0;
        if (issued > in.seq) continue;
        if (named < kMaxMissingNamed) {
          missing += (named == 0 ? "" : ", ") + std::to_string(ranks[member].rank);
          ++named;
        }
        ++absent;
      }
      if (absent > named) missing += ", ... (" + std::to_string(absent - named) + " more)";
      const bool folded = gi.expected < program.groups(in.group).ranks_size();
      b.description = collective_name(op.collective) + " of " + std::to_string(op.value) + " bytes on " +
                      describe_group(in.group) + " (its collective #" + std::to_string(in.seq) + "): " +
                      std::to_string(in.arrived) + " of " + std::to_string(gi.expected) +
                      (folded ? " simulated" : "") + " members arrived, waiting for " +
                      (absent == 1 ? "rank " : "ranks ") + missing;
      break;
    }
    case OpKind::kSend:
      b.description = describe_p2p(sid) + ": no matching recv was reached";
      break;
    case OpKind::kRecv:
      b.description = describe_p2p(sid) + ": no matching send was reached";
      break;
    case OpKind::kCompute:
      if (st.status == StreamStatus::kBlockedSlot) {
        b.description = "compute waiting for a compute slot (engine bug: a slot is never held forever)";
        break;
      }
      [[fallthrough]];
    case OpKind::kRecord:
      b.description = "not blocked (engine bug: stream stopped on a non-blocking op)";
      break;
  }
  if (last_iteration > 0) b.description = "in iteration " + std::to_string(st.iteration) + ": " + b.description;
  return b;
}

void Simulator::Impl::throw_deadlock() const {
  std::vector<BlockedOp> blocked;
  for (uint32_t s = 0; s < streams.size(); ++s) {
    if (streams[s].status != StreamStatus::kDone) blocked.push_back(describe_blocked(s));
  }
  std::string msg = "deadlock at t = " + format_ms(now) + ": " + std::to_string(blocked.size()) +
                    (blocked.size() == 1 ? " stream cannot" : " streams cannot") +
                    " proceed and no event is left to process:";
  for (size_t i = 0; i < blocked.size() && i < kMaxListed; ++i) {
    const BlockedOp& b = blocked[i];
    msg += "\n  rank " + std::to_string(b.rank) + " stream " + b.stream + " op " + std::to_string(b.op) + ": " +
           b.description;
  }
  if (blocked.size() > kMaxListed) msg += "\n  ... and " + std::to_string(blocked.size() - kMaxListed) + " more";
  throw DeadlockError(msg, std::move(blocked));
}

void Simulator::Impl::throw_collective_mismatch(const CollectiveInstance& in, uint32_t sid, const FlatOp& op) const {
  throw Error(SourceLocation{}, "collective mismatch on " + describe_group(in.group) + " (its collective #" + std::to_string(in.seq) +
                  "): " + where(in.first) + " issues " + collective_name(in.kind) + " of " +
                  std::to_string(in.bytes) + " bytes, but " + where(sid) + " issues " +
                  collective_name(op.collective) + " of " + std::to_string(op.value) + " bytes",
              "members must issue the collectives of a group in the same order, with the same kind and size");
}

void Simulator::Impl::throw_p2p_mismatch(uint32_t send, uint32_t recv) const {
  throw Error(SourceLocation{}, "p2p mismatch: " + where(send) + " (" + describe_p2p(send) + ") is matched in order with " +
                  where(recv) + " (" + describe_p2p(recv) + ")",
              "sends and receives between two ranks on one channel must pair up in order with equal tags and sizes");
}

}  // namespace lacuna::engine
