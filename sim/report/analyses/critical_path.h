// What `lacuna simulate --critical-path` reports (docs/critical-path.md): the
// critical path's composition (op classes, bubble categories, ranks, pipeline
// stages), slack per rank and per op, and how much the iteration would gain
// from a faster op class, estimated from the path and, by the caller, checked
// by re-simulation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/core/units.h"
#include "sim/proto/program.pb.h"
#include "sim/report/analyses/op_graph.h"
#include "sim/report/analyses/slack.h"

namespace lacuna::report {

struct PathShare {
  std::string key;
  TimeNs time;
};

struct RankOnPath {
  int32_t rank = 0;
  std::string label;  // rank_label()
  TimeNs time;        // Σ durations of its steps
  int64_t steps = 0;
};

// Per simulated rank, from the whole graph's slack.
struct RankSlack {
  int32_t rank = 0;
  std::vector<int32_t> represents;  // ranks it stands for (fold), itself included
  int64_t compute_ops = 0;
  int64_t critical_compute_ops = 0;  // with zero slack
  TimeNs min_compute;                // least slack of its compute ops (0 when it has none)
};

// One op of a traced rank (compute, collective, send, recv).
struct OpSlack {
  int32_t rank = 0;
  int32_t stream = 0;
  int32_t op = 0;
  TimeNs slack;
};

// "What if op class X were faster by `speedup`" for a compute op class.
struct Sensitivity {
  ir::OpClass op_class = ir::OP_CLASS_UNSPECIFIED;
  std::string key;  // "compute gemm"
  TimeNs on_path;   // time of X's compute ops on the path (cost-model timed ones)
  // on_path × speedup, rounded: what the iteration gains if the path stays
  // critical. Other paths can take over, so with fixed communication times
  // (--network analytic) the gain is at most this (up to rounding to whole ns
  // per op); the flow network's times depend on overlap and can move either
  // way (docs/critical-path.md#sensitivity).
  TimeNs estimate;
  // Set by the caller (the CLI re-simulates the top classes).
  bool resimulated = false;
  TimeNs resimulated_time;   // the iteration time with X's compute scaled by 1 − speedup
  TimeNs resimulated_saved;  // the iteration time minus that
};

struct CriticalPathReport {
  // "whole": every op and edge kept, slack computed; "pruned": only the
  // binding chains (docs/critical-path.md#size), no slack.
  std::string graph;
  uint64_t nodes = 0;  // whole: in the graph; pruned: the most kept at once
  uint64_t edges = 0;  // whole only
  uint64_t ops = 0;    // ops of the simulated ranks (what decides whole or pruned)
  std::string no_slack_reason;  // pruned: why

  CriticalPath path;
  int32_t ranks_on_path = 0;
  int64_t rank_changes = 0;  // steps whose rank differs from the step before
  std::vector<PathShare> by_class;     // op-class keys (timeline.h) and "host"; largest first
  std::vector<PathShare> by_category;  // "compute <phase>", then bubble keys, in that order; zeros kept
  std::vector<RankOnPath> by_rank;     // largest first
  std::vector<PathShare> by_stage;     // "pp N", largest first

  double speedup = 0.1;
  std::vector<Sensitivity> sensitivity;  // compute classes on the path, largest first

  bool has_slack() const { return graph == "whole"; }
  std::vector<RankSlack> rank_slack;  // simulated ranks, in simulation order
  std::vector<OpSlack> op_slack;      // the traced ranks' ops
};

struct PathInputs {
  const CriticalPath* path = nullptr;
  // Whole graph: the graph and its timing (null when pruned).
  const OpGraph* graph = nullptr;
  const GraphTiming* timing = nullptr;
  uint64_t pruned_peak_nodes = 0;
  uint64_t ops = 0;
  std::string no_slack_reason;
  std::vector<int32_t> simulated_ranks;
  std::vector<std::vector<int32_t>> represents;  // per simulated rank (fold); empty: itself
  std::vector<int32_t> traced_ranks;  // op slack is listed for these
  double speedup = 0.1;
};

CriticalPathReport summarize_critical_path(const ir::Program& program, const PathInputs& in);

}  // namespace lacuna::report
