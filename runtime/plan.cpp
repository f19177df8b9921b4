#include "runtime/plan.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "kernels/kernel_case.h"
#include "sim/core/error.h"
#include "sim/ir/bound_program.h"
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

  const ir::BoundProgram bound(program);
  // Transfer ends in issue order, so that each recv learns whether its
  // matching send has a fixed duration (the sender decides).
  ir::P2pMatching<std::pair<std::size_t, std::size_t>> transfers;  // (stream plan, op) indices

  for (int r : plan.ranks) {
    const ir::RankBinding& binding = program.ranks(r);
    const ir::RankClass& cls = bound.rank_class(r);
    plan.num_events[static_cast<std::size_t>(r)] = cls.num_events();
    const double scale =
        options.apply_compute_time_scale && binding.has_compute_time_scale() ? binding.compute_time_scale() : 1.0;

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
        // Slots, groups and events are in range: validate_program checked them.
        auto resolve_peer = [&](int peer) {
          if (peer == r) {
            throw Error("execute: " + p.label + " sends to or receives from its own rank " + std::to_string(r) +
                        "; the communicator pairs two different ranks");
          }
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
            p.group = bound.collective_group(r, op);
            const auto members = bound.members(p.group);
            p.group_size = members.size();
            p.member = bound.member_index(p.group, r);
            for (int m : members) {
              if (selected[static_cast<std::size_t>(m)]) continue;
              if (options.replay == nullptr) {
                throw Error(SourceLocation{}, "execute: " + p.label + " runs a collective on group " + std::to_string(p.group) +
                                " with rank " + std::to_string(m) + ", which is not executed",
                            "execute every member of the group, or replay (--replay)");
              }
              p.emulated = true;
            }
            p.root = bound.root(p.group);
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
            const std::int64_t bytes = send ? op.send().bytes() : op.recv().bytes();
            const ir::P2pKey key = bound.p2p_key(r, op);
            p.kind = send ? OpKind::kSend : OpKind::kRecv;
            p.peer = resolve_peer(send ? key.dst : key.src);
            p.channel = key.channel;
            p.tag = send ? op.send().tag() : op.recv().tag();
            p.bytes = bytes;
            p.elements = float_count(bytes);
            p.what = (send ? "send " : "recv ") + std::to_string(bytes) + (send ? " B to rank " : " B from rank ") +
                     std::to_string(p.peer) + " channel " + std::to_string(p.channel) + " tag " +
                     std::to_string(p.tag);
            if (send) {
              p.fixed_ns = op.send().fixed_duration_ns();
              if (!p.emulated) sp.buffer_a = std::max(sp.buffer_a, p.fixed_ns > 0 ? std::size_t{1} : p.elements);
            }
            const std::pair<std::size_t, std::size_t> at{plan.streams.size(), sp.ops.size()};
            if (send) {
              transfers.add_send(key, at);
            } else {
              transfers.add_recv(key, at);
            }
            break;
          }
          case ir::Op::kRecord:
          case ir::Op::kWait: {
            const bool record = op.kind_case() == ir::Op::kRecord;
            p.kind = record ? OpKind::kRecord : OpKind::kWait;
            p.event = record ? op.record().event() : op.wait().event();
            p.value = record ? 0 : op.wait().value();
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

  // Second pass: recvs learn whether their matching send is fixed-duration.
  transfers.for_each_pair([&](const ir::P2pKey&, const auto& send, const auto& recv) {
    PlannedOp& r = plan.streams[recv.first].ops[recv.second];
    if (!r.emulated) r.fixed_ns = plan.streams[send.first].ops[send.second].fixed_ns;
  });
  for (StreamPlan& sp : plan.streams) {
    for (const PlannedOp& p : sp.ops) {
      if (p.kind == OpKind::kRecv && !p.emulated) sp.buffer_a = std::max(sp.buffer_a, p.fixed_ns > 0 ? std::size_t{1} : p.elements);
    }
  }
  return plan;
}


}  // namespace lacuna::runtime
