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

namespace {

// Builds a Plan stream by stream; one method per kind of op.
class Planner {
 public:
  Planner(const ir::Program& program, const PlanOptions& options)
      : program_(program), options_(options), bound_(program) {}

  Plan build() {
    select_ranks();
    for (int r : plan_.ranks) plan_rank(r);
    learn_fixed_transfers();
    return std::move(plan_);
  }

 private:
  // The executed ranks: options.ranks, or all.
  void select_ranks() {
    const int num_ranks = program_.ranks_size();
    if (num_ranks == 0) throw Error("execute: the program has no ranks");
    selected_.assign(static_cast<std::size_t>(num_ranks), options_.ranks.empty());
    for (int r : options_.ranks) {
      if (r < 0 || r >= num_ranks) {
        throw Error("execute: rank " + std::to_string(r) + " is not in the program (ranks 0.." +
                    std::to_string(num_ranks - 1) + ")");
      }
      selected_[static_cast<std::size_t>(r)] = true;
    }
    for (int r = 0; r < num_ranks; ++r) {
      if (selected_[static_cast<std::size_t>(r)]) plan_.ranks.push_back(r);
    }
    plan_.num_events.assign(static_cast<std::size_t>(num_ranks), 0);
  }

  void plan_rank(int r) {
    const ir::RankBinding& binding = program_.ranks(r);
    const ir::RankClass& cls = bound_.rank_class(r);
    plan_.num_events[static_cast<std::size_t>(r)] = cls.num_events();
    const double scale =
        options_.apply_compute_time_scale && binding.has_compute_time_scale() ? binding.compute_time_scale() : 1.0;
    for (int s = 0; s < cls.streams_size(); ++s) {
      const ir::Stream& stream = cls.streams(s);
      StreamPlan sp;
      sp.rank = r;
      sp.stream = s;
      sp.name = stream.name();
      std::map<std::string, int> case_of;  // one kernel case per distinct compute op of the stream
      for (int i = 0; i < stream.ops_size(); ++i) {
        const ir::Op& op = stream.ops(i);
        PlannedOp p;
        p.label = stream_label(r, s, sp.name) + " op " + std::to_string(i);
        // Slots, groups and events are in range: validate_program checked them.
        switch (op.kind_case()) {
          case ir::Op::kCompute: plan_compute(op.compute(), scale, case_of, p, sp); break;
          case ir::Op::kCollective: plan_collective(r, op, p, sp); break;
          case ir::Op::kSend:
          case ir::Op::kRecv: plan_transfer(r, op, p, sp); break;
          case ir::Op::kRecord:
          case ir::Op::kWait: plan_event(op, p); break;
          default: throw Error("execute: " + p.label + " has no kind");
        }
        if (p.emulated) emulate(r, s, i, p);
        sp.ops.push_back(std::move(p));
      }
      plan_.streams.push_back(std::move(sp));
    }
  }

  void plan_compute(const ir::Compute& c, double scale, std::map<std::string, int>& case_of, PlannedOp& p,
                    StreamPlan& sp) {
    p.kind = OpKind::kCompute;
    p.what = kernels::describe_op(c);
    if (c.fixed_duration_ns() > 0) {
      p.fixed_ns = static_cast<std::int64_t>(static_cast<double>(c.fixed_duration_ns()) * scale + 0.5);
      return;
    }
    auto it = case_of.find(p.what);
    if (it == case_of.end()) {
      it = case_of.emplace(p.what, static_cast<int>(sp.computes.size())).first;
      sp.computes.push_back(c);
    }
    p.case_index = it->second;
    p.scale = scale;
  }

  void plan_collective(int r, const ir::Op& op, PlannedOp& p, StreamPlan& sp) {
    const ir::Collective& c = op.collective();
    p.kind = OpKind::kCollective;
    p.collective = to_runtime(c.kind(), p.label);
    p.group = bound_.collective_group(r, op);
    const auto members = bound_.members(p.group);
    p.group_size = members.size();
    p.member = bound_.member_index(p.group, r);
    for (int m : members) {
      if (selected_[static_cast<std::size_t>(m)]) continue;
      if (options_.replay == nullptr) {
        throw Error(SourceLocation{}, "execute: " + p.label + " runs a collective on group " + std::to_string(p.group) +
                        " with rank " + std::to_string(m) + ", which is not executed",
                    "execute every member of the group, or replay (--replay)");
      }
      p.emulated = true;
    }
    p.root = bound_.root(p.group);
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
    if (p.emulated) return;  // no data moves
    if (p.fixed_ns > 0) {
      sp.buffer_a = std::max<std::size_t>(sp.buffer_a, 1);
      return;
    }
    sp.buffer_a = std::max(sp.buffer_a, p.elements);
    if (p.collective == CollectiveKind::kAllToAll || p.collective == CollectiveKind::kReduce) {
      sp.buffer_b = std::max(sp.buffer_b, p.elements);
    }
  }

  // Send and Recv carry the same fields; the sender decides a fixed duration
  // (the recv learns it in learn_fixed_transfers).
  void plan_transfer(int r, const ir::Op& op, PlannedOp& p, StreamPlan& sp) {
    const bool send = op.kind_case() == ir::Op::kSend;
    const std::int64_t bytes = send ? op.send().bytes() : op.recv().bytes();
    const ir::P2pKey key = bound_.p2p_key(r, op);
    p.kind = send ? OpKind::kSend : OpKind::kRecv;
    p.peer = send ? key.dst : key.src;
    if (p.peer == r) {
      throw Error("execute: " + p.label + " sends to or receives from its own rank " + std::to_string(r) +
                  "; the communicator pairs two different ranks");
    }
    if (!selected_[static_cast<std::size_t>(p.peer)]) {
      if (options_.replay == nullptr) {
        throw Error(SourceLocation{}, "execute: " + p.label + " talks to rank " + std::to_string(p.peer) +
                        ", which is not executed",
                    "add rank " + std::to_string(p.peer) + " to the executed ranks, or replay (--replay)");
      }
      p.emulated = true;
    }
    p.channel = key.channel;
    p.tag = send ? op.send().tag() : op.recv().tag();
    p.bytes = bytes;
    p.elements = float_count(bytes);
    p.what = (send ? "send " : "recv ") + std::to_string(bytes) + (send ? " B to rank " : " B from rank ") +
             std::to_string(p.peer) + " channel " + std::to_string(p.channel) + " tag " + std::to_string(p.tag);
    const std::pair<std::size_t, std::size_t> at{plan_.streams.size(), sp.ops.size()};
    if (send) {
      p.fixed_ns = op.send().fixed_duration_ns();
      if (!p.emulated) sp.buffer_a = std::max(sp.buffer_a, p.fixed_ns > 0 ? std::size_t{1} : p.elements);
      transfers_.add_send(key, at);
    } else {
      transfers_.add_recv(key, at);
    }
  }

  static void plan_event(const ir::Op& op, PlannedOp& p) {
    const bool record = op.kind_case() == ir::Op::kRecord;
    p.kind = record ? OpKind::kRecord : OpKind::kWait;
    p.event = record ? op.record().event() : op.wait().event();
    p.value = record ? 0 : op.wait().value();
    p.what = record ? "record event " + std::to_string(p.event)
                    : "wait event " + std::to_string(p.event) + " >= " + std::to_string(p.value);
  }

  // An op with a peer or member that is not executed ends at its predicted
  // span (runtime/replay.h).
  void emulate(int r, int s, int i, PlannedOp& p) {
    const PredictedSpan* predicted = options_.replay->find(r, s, i);
    if (predicted == nullptr) {
      throw Error("execute: replay has no predicted time for " + p.label + " (" + p.what +
                  "); the prediction must come from a simulation of the same program");
    }
    if (predicted->end_ns < predicted->start_ns) {
      throw Error("execute: replay: predicted span of " + p.label + " ends before it starts");
    }
    p.predicted = *predicted;
    p.what += " (emulated)";
    ++plan_.emulated_ops;
  }

  // Recvs learn whether their matching send is fixed-duration (the IR's
  // matching rule, ir::P2pMatching), then size their buffers.
  void learn_fixed_transfers() {
    transfers_.for_each_pair([&](const ir::P2pKey&, const auto& send, const auto& recv) {
      PlannedOp& r = plan_.streams[recv.first].ops[recv.second];
      if (!r.emulated) r.fixed_ns = plan_.streams[send.first].ops[send.second].fixed_ns;
    });
    for (StreamPlan& sp : plan_.streams) {
      for (const PlannedOp& p : sp.ops) {
        if (p.kind == OpKind::kRecv && !p.emulated) {
          sp.buffer_a = std::max(sp.buffer_a, p.fixed_ns > 0 ? std::size_t{1} : p.elements);
        }
      }
    }
  }

  const ir::Program& program_;
  const PlanOptions& options_;
  const ir::BoundProgram bound_;
  Plan plan_;
  std::vector<bool> selected_;  // per global rank
  // Transfer ends in issue order: (stream plan, op) indices.
  ir::P2pMatching<std::pair<std::size_t, std::size_t>> transfers_;
};

}  // namespace

Plan make_plan(const ir::Program& program, const PlanOptions& options) {
  // The IR's rules first (sim/ir/validate.h), as the simulator checks them;
  // the planner checks only what executing adds (the rank subset, replay).
  ir::validate_program(program);
  return Planner(program, options).build();
}

}  // namespace lacuna::runtime
