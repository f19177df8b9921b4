#include "runtime/plan.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "kernels/kernel_case.h"
#include "sim/core/error.h"
#include "sim/ir/validate.h"

namespace lacuna::runtime {
namespace {


CollectiveKind to_runtime(ir::CollectiveKind kind, const std::string& where) {
  switch (kind) {
    case ir::ALL_REDUCE: return CollectiveKind::kAllReduce;
    case ir::ALL_GATHER: return CollectiveKind::kAllGather;
    case ir::REDUCE_SCATTER: return CollectiveKind::kReduceScatter;
    case ir::ALL_TO_ALL: return CollectiveKind::kAllToAll;
    case ir::BROADCAST: return CollectiveKind::kBroadcast;
    case ir::REDUCE: return CollectiveKind::kReduce;
    default: throw Error(where + ": collective kind " + std::to_string(static_cast<int>(kind)) + " is not supported");
  }
}

}  // namespace

std::string stream_label(int rank, int stream, const std::string& name) {
  return "rank " + std::to_string(rank) + " stream " + std::to_string(stream) + " (" + name + ")";
}

namespace {

std::size_t float_count(std::int64_t bytes) { return static_cast<std::size_t>((bytes + 3) / 4); }

}  // namespace

Plan make_plan(const ir::Program& program, const PlanOptions& options) {
  // The IR's rules first (sim/ir/validate.h), as the simulator checks them;
  // what follows checks only what executing adds (the rank subset, replay).
  ir::validate_program(program);
  const int num_ranks = program.ranks_size();
  if (num_ranks == 0) throw Error("execute: the program has no ranks");

  Plan plan;
  std::vector<bool> selected(static_cast<std::size_t>(num_ranks), options.ranks.empty());
  for (int r : options.ranks) {
    if (r < 0 || r >= num_ranks) {
      throw Error("execute: rank " + std::to_string(r) + " is not in the program (ranks 0.." +
                  std::to_string(num_ranks - 1) + ")");
    }
    selected[static_cast<std::size_t>(r)] = true;
  }
  for (int r = 0; r < num_ranks; ++r) {
    if (selected[static_cast<std::size_t>(r)]) plan.ranks.push_back(r);
  }
  plan.num_events.assign(static_cast<std::size_t>(num_ranks), 0);

  for (int g = 0; g < program.groups_size(); ++g) {
    const auto& ranks = program.groups(g).ranks();
    for (int i = 0; i < ranks.size(); ++i) {
      if (ranks[i] < 0 || ranks[i] >= num_ranks || (i > 0 && ranks[i] <= ranks[i - 1])) {
        throw Error("execute: group " + std::to_string(g) + " must list ascending ranks in [0, " +
                    std::to_string(num_ranks) + ")");
      }
    }
  }

  // Sends' fixed durations per (src, dst, channel) in issue order, so that the
  // matching recv knows the transfer is fixed (the sender decides).
  std::map<std::tuple<int, int, int>, std::vector<std::int64_t>> send_fixed;
  std::map<std::tuple<int, int, int>, std::size_t> recv_seen;

  for (int r : plan.ranks) {
    const ir::RankBinding& binding = program.ranks(r);
    if (binding.class_id() < 0 || binding.class_id() >= program.classes_size()) {
      throw Error("execute: rank " + std::to_string(r) + " has class_id " + std::to_string(binding.class_id()) +
                  " but the program has " + std::to_string(program.classes_size()) + " classes");
    }
    const ir::RankClass& cls = program.classes(binding.class_id());
    plan.num_events[static_cast<std::size_t>(r)] = cls.num_events();
    const double scale =
        options.apply_compute_time_scale && binding.has_compute_time_scale() ? binding.compute_time_scale() : 1.0;
    if (!(scale > 0)) throw Error("execute: rank " + std::to_string(r) + " has compute_time_scale <= 0");

    for (int s = 0; s < cls.streams_size(); ++s) {
      const ir::Stream& stream = cls.streams(s);
      StreamPlan sp;
      sp.rank = r;
      sp.stream = s;
      sp.name = stream.name();
      std::map<std::string, int> case_of;
      for (int i = 0; i < stream.ops_size(); ++i) {
        const ir::Op& op = stream.ops(i);
        PlannedOp p;
        p.label = stream_label(r, s, sp.name) + " op " + std::to_string(i);
        auto resolve_group = [&](int slot) {
          if (slot < 0 || slot >= binding.group_size() || binding.group(slot) < 0 ||
              binding.group(slot) >= program.groups_size()) {
            throw Error("execute: " + p.label + " uses group slot " + std::to_string(slot) +
                        ", which rank " + std::to_string(r) + " does not bind to a group");
          }
          return binding.group(slot);
        };
        auto resolve_peer = [&](int slot) {
          if (slot < 0 || slot >= binding.peer_size() || binding.peer(slot) < 0 || binding.peer(slot) >= num_ranks ||
              binding.peer(slot) == r) {
            throw Error("execute: " + p.label + " uses peer slot " + std::to_string(slot) + ", which rank " +
                        std::to_string(r) + " does not bind to another rank");
          }
          const int peer = binding.peer(slot);
          if (!selected[static_cast<std::size_t>(peer)]) {
            if (options.replay == nullptr) {
              throw Error(SourceLocation{}, "execute: " + p.label + " talks to rank " + std::to_string(peer) +
                          ", which is not executed",
                          "add rank " + std::to_string(peer) + " to the executed ranks, or replay (--replay)");
            }
            p.emulated = true;
          }
          return peer;
        };
        switch (op.kind_case()) {
          case ir::Op::kCompute: {
            const ir::Compute& c = op.compute();
            p.kind = OpKind::kCompute;
            p.what = kernels::describe_op(c);
            if (c.fixed_duration_ns() > 0) {
              p.fixed_ns = static_cast<std::int64_t>(static_cast<double>(c.fixed_duration_ns()) * scale + 0.5);
            } else {
              const std::string key = p.what;
              auto it = case_of.find(key);
              if (it == case_of.end()) {
                it = case_of.emplace(key, static_cast<int>(sp.computes.size())).first;
                sp.computes.push_back(c);
              }
              p.case_index = it->second;
              p.scale = scale;
            }
            break;
          }
          case ir::Op::kCollective: {
            const ir::Collective& c = op.collective();
            p.kind = OpKind::kCollective;
            p.collective = to_runtime(c.kind(), p.label);
            p.group = resolve_group(c.group_slot());
            const auto& members = program.groups(p.group).ranks();
            p.group_size = members.size();
            auto pos = std::find(members.begin(), members.end(), r);
            if (pos == members.end()) {
              throw Error("execute: " + p.label + " runs a collective on group " + std::to_string(p.group) +
                          ", which does not contain rank " + std::to_string(r));
            }
            p.member = static_cast<int>(pos - members.begin());
            for (int m : members) {
              if (selected[static_cast<std::size_t>(m)]) continue;
              if (options.replay == nullptr) {
                throw Error(SourceLocation{}, "execute: " + p.label + " runs a collective on group " + std::to_string(p.group) +
                                " with rank " + std::to_string(m) + ", which is not executed",
                            "execute every member of the group, or replay (--replay)");
              }
              p.emulated = true;
            }
            p.root = members[0];
            if (c.bytes() < 0) throw Error("execute: " + p.label + ": negative bytes");
            p.bytes = c.bytes();
            p.elements = float_count(c.bytes());
            if (p.collective == CollectiveKind::kAllGather || p.collective == CollectiveKind::kReduceScatter ||
                p.collective == CollectiveKind::kAllToAll) {
              const auto n = static_cast<std::size_t>(p.group_size);
              p.elements = (p.elements + n - 1) / n * n;
            }
            p.fixed_ns = c.fixed_duration_ns();
            p.what = std::string(to_string(p.collective)) + " " + std::to_string(c.bytes()) + " B on group " +
                     std::to_string(p.group);
            if (p.emulated) {
              // no data moves
            } else if (p.fixed_ns > 0) {
              sp.buffer_a = std::max<std::size_t>(sp.buffer_a, 1);
            } else {
              sp.buffer_a = std::max(sp.buffer_a, p.elements);
              if (p.collective == CollectiveKind::kAllToAll || p.collective == CollectiveKind::kReduce) {
                sp.buffer_b = std::max(sp.buffer_b, p.elements);
              }
            }
            break;
          }
          case ir::Op::kSend:
          case ir::Op::kRecv: {
            // Send and Recv carry the same fields; the sender decides a fixed duration.
            const bool send = op.kind_case() == ir::Op::kSend;
            const int peer_slot = send ? op.send().peer_slot() : op.recv().peer_slot();
            const std::int64_t bytes = send ? op.send().bytes() : op.recv().bytes();
            p.kind = send ? OpKind::kSend : OpKind::kRecv;
            p.peer = resolve_peer(peer_slot);
            p.channel = send ? op.send().channel() : op.recv().channel();
            p.tag = send ? op.send().tag() : op.recv().tag();
            if (bytes < 0 || p.channel < 0) throw Error("execute: " + p.label + ": negative bytes or channel");
            p.bytes = bytes;
            p.elements = float_count(bytes);
            p.what = (send ? "send " : "recv ") + std::to_string(bytes) + (send ? " B to rank " : " B from rank ") +
                     std::to_string(p.peer) + " channel " + std::to_string(p.channel) + " tag " +
                     std::to_string(p.tag);
            if (send) {
              p.fixed_ns = op.send().fixed_duration_ns();
              send_fixed[{r, p.peer, p.channel}].push_back(p.fixed_ns);
              if (!p.emulated) sp.buffer_a = std::max(sp.buffer_a, p.fixed_ns > 0 ? std::size_t{1} : p.elements);
            }
            break;
          }
          case ir::Op::kRecord:
          case ir::Op::kWait: {
            const bool record = op.kind_case() == ir::Op::kRecord;
            p.kind = record ? OpKind::kRecord : OpKind::kWait;
            p.event = record ? op.record().event() : op.wait().event();
            p.value = record ? 0 : op.wait().value();
            if (p.event < 0 || p.event >= cls.num_events()) {
              throw Error("execute: " + p.label + " uses event " + std::to_string(p.event) + " but class '" +
                          cls.name() + "' has num_events = " + std::to_string(cls.num_events()));
            }
            p.what = record ? "record event " + std::to_string(p.event)
                            : "wait event " + std::to_string(p.event) + " >= " + std::to_string(p.value);
            break;
          }
          default: throw Error("execute: " + p.label + " has no kind");
        }
        if (p.emulated) {
          const PredictedSpan* predicted = options.replay->find(r, s, i);
          if (predicted == nullptr) {
            throw Error("execute: replay has no predicted time for " + p.label + " (" + p.what +
                        "); the prediction must come from a simulation of the same program");
          }
          if (predicted->end_ns < predicted->start_ns) throw Error("execute: replay: predicted span of " + p.label + " ends before it starts");
          p.predicted = *predicted;
          p.what += " (emulated)";
          ++plan.emulated_ops;
        }
        sp.ops.push_back(std::move(p));
      }
      plan.streams.push_back(std::move(sp));
    }
  }

  // Second pass: recvs learn whether their matching send is fixed-duration
  // (matched in order per (src, dst, channel), streams of a rank in order).
  for (StreamPlan& sp : plan.streams) {
    for (PlannedOp& p : sp.ops) {
      if (p.kind != OpKind::kRecv || p.emulated) continue;
      const std::tuple<int, int, int> key{p.peer, sp.rank, p.channel};
      const std::size_t k = recv_seen[key]++;
      auto it = send_fixed.find(key);
      if (it != send_fixed.end() && k < it->second.size()) p.fixed_ns = it->second[k];
      sp.buffer_a = std::max(sp.buffer_a, p.fixed_ns > 0 ? std::size_t{1} : p.elements);
    }
  }
  return plan;
}


}  // namespace lacuna::runtime
