#include "sim/report/analyses/critical_path.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <tuple>

#include "sim/ir/bound_program.h"
#include "sim/report/observers/bubble_accounting.h"
#include "sim/report/analyses/comm_kind.h"
#include "sim/report/formats/names.h"
#include "sim/report/observers/timeline.h"

namespace lacuna::report {

namespace {

const ir::Stream& stream_of(const ir::Program& p, int32_t rank, int32_t stream) {
  return ir::BoundProgram(p).rank_class(rank).streams(stream);
}

// Largest first, then by key: a total order.
void sort_shares(std::vector<PathShare>& v) {
  std::sort(v.begin(), v.end(), [](const PathShare& a, const PathShare& b) {
    return a.time != b.time ? a.time > b.time : a.key < b.key;
  });
}

std::vector<PathShare> shares(const std::map<std::string, TimeNs>& m) {
  std::vector<PathShare> v;
  for (const auto& [k, t] : m) v.push_back({k, t});
  sort_shares(v);
  return v;
}

}  // namespace

CriticalPathReport summarize_critical_path(const ir::Program& p, const PathInputs& in) {
  CriticalPathReport r;
  r.path = *in.path;
  r.ops = in.ops;
  r.speedup = in.speedup;
  const bool multimodal = p.info().modules_size() > 0;

  std::map<std::string, TimeNs> by_class, by_stage;
  std::map<int32_t, RankOnPath> by_rank;
  std::array<TimeNs, kNumPhases> phases{};
  std::array<TimeNs, kNumBubbles> bubbles{};
  std::map<int, TimeNs> compute_by_class;  // ir::OpClass → cost-model timed compute on the path
  int32_t prev_rank = -1;
  for (const PathStep& s : r.path.steps) {
    const TimeNs d = s.duration();
    if (prev_rank >= 0 && s.rank != prev_rank) ++r.rank_changes;
    prev_rank = s.rank;
    RankOnPath& rk = by_rank[s.rank];
    rk.rank = s.rank;
    rk.time += d;
    ++rk.steps;
    by_stage["pp " + std::to_string(p.ranks(s.rank).coord().pp())] += d;
    if (s.kind == NodeKind::kHost) {
      by_class["host"] += d;
      bubbles[static_cast<size_t>(Bubble::kHostOverhead)] += d;
      continue;
    }
    const ir::Stream& stream = stream_of(p, s.rank, s.stream);
    const ir::Op& op = stream.ops(s.op);
    by_class[op_class_key(p, stream, op)] += d;
    if (op.has_compute()) {
      const int phase = static_cast<int>(op.phase());
      if (phase >= 0 && phase < kNumPhases) phases[static_cast<size_t>(phase)] += d;
      if (op.compute().fixed_duration_ns() <= 0) compute_by_class[static_cast<int>(op.compute().op_class())] += d;
    } else {
      bubbles[static_cast<size_t>(exposed_category(comm_kind(p, stream, op)))] += d;
    }
  }
  r.by_class = shares(by_class);
  r.by_stage = shares(by_stage);
  for (auto& [rank, v] : by_rank) {
    v.label = rank_label(p, rank);
    r.by_rank.push_back(std::move(v));
  }
  std::sort(r.by_rank.begin(), r.by_rank.end(), [](const RankOnPath& a, const RankOnPath& b) {
    return a.time != b.time ? a.time > b.time : a.rank < b.rank;
  });
  r.ranks_on_path = static_cast<int32_t>(r.by_rank.size());
  for (int ph = 1; ph < kNumPhases; ++ph) {
    if (phases[static_cast<size_t>(ph)] > TimeNs::zero()) {
      r.by_category.push_back({"compute " + std::string(phase_key(static_cast<ir::Phase>(ph))),
                               phases[static_cast<size_t>(ph)]});
    }
  }
  for (Bubble b : kAllBubbles) {
    if (bubble_shown(b, multimodal, p.info().has_moe())) r.by_category.push_back({std::string(bubble_key(b)), bubbles[static_cast<size_t>(b)]});
  }

  for (const auto& [cls, t] : compute_by_class) {
    Sensitivity s;
    s.op_class = static_cast<ir::OpClass>(cls);
    s.key = "compute " + std::string(op_class_name(s.op_class));
    s.on_path = t;
    s.estimate = TimeNs(std::llround(static_cast<double>(t.count()) * in.speedup));
    r.sensitivity.push_back(s);
  }
  std::sort(r.sensitivity.begin(), r.sensitivity.end(), [](const Sensitivity& a, const Sensitivity& b) {
    return a.on_path != b.on_path ? a.on_path > b.on_path : a.op_class < b.op_class;
  });

  if (in.graph == nullptr || in.timing == nullptr) {
    r.graph = "pruned";
    r.nodes = in.pruned_peak_nodes;
    r.no_slack_reason = in.no_slack_reason;
    return r;
  }
  r.graph = "whole";
  r.nodes = in.graph->nodes.size();
  r.edges = in.graph->edges.size();
  std::vector<int32_t> index(static_cast<size_t>(p.ranks_size()), -1);
  for (size_t i = 0; i < in.simulated_ranks.size(); ++i) {
    index[static_cast<size_t>(in.simulated_ranks[i])] = static_cast<int32_t>(i);
    RankSlack rs;
    rs.rank = in.simulated_ranks[i];
    rs.represents = i < in.represents.size() ? in.represents[i] : std::vector<int32_t>{rs.rank};
    r.rank_slack.push_back(std::move(rs));
  }
  std::vector<int32_t> traced(static_cast<size_t>(p.ranks_size()), 0);
  for (int32_t t : in.traced_ranks) traced[static_cast<size_t>(t)] = 1;
  for (size_t v = 0; v < in.graph->nodes.size(); ++v) {
    const GraphNode& n = in.graph->nodes[v];
    const TimeNs slack = in.timing->slack[v];
    if (n.kind == NodeKind::kCompute) {
      RankSlack& rs = r.rank_slack[static_cast<size_t>(index[static_cast<size_t>(n.rank)])];
      rs.min_compute = rs.compute_ops == 0 ? slack : std::min(rs.min_compute, slack);
      ++rs.compute_ops;
      if (slack == TimeNs::zero()) ++rs.critical_compute_ops;
    }
    const bool op = n.kind == NodeKind::kCompute || n.kind == NodeKind::kCollective || n.kind == NodeKind::kTransfer;
    if (op && traced[static_cast<size_t>(n.rank)]) r.op_slack.push_back({n.rank, n.stream, n.op, slack});
  }
  std::sort(r.op_slack.begin(), r.op_slack.end(), [](const OpSlack& a, const OpSlack& b) {
    return std::tie(a.rank, a.stream, a.op) < std::tie(b.rank, b.stream, b.op);
  });
  return r;
}

}  // namespace lacuna::report
