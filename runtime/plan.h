// The execution plan: a program's per-rank streams lowered once, validated,
// into what a backend runs (runtime/README.md). The CPU and the CUDA backends
// both execute this same plan, so they agree on op order, groups, peers,
// buffer sizes, fixed durations and which ops a replay emulates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/communicator.h"
#include "runtime/replay.h"
#include "sim/proto/program.pb.h"

namespace lacuna::runtime {

enum class OpKind { kCompute, kCollective, kSend, kRecv, kRecord, kWait };

struct PlannedOp {
  OpKind kind = OpKind::kCompute;
  std::int64_t fixed_ns = 0;  // compute (scaled), collective, p2p (the send's, for a recv too)
  // compute
  int case_index = -1;  // into StreamPlan::computes; -1 for fixed durations
  double scale = 1.0;   // compute_time_scale applied to a real kernel (> 1 only)
  // collective
  CollectiveKind collective = CollectiveKind::kAllReduce;
  int group = -1;
  int member = 0;  // index of the rank in the group
  int group_size = 1;
  int root = 0;  // broadcast / reduce: the group's first rank
  // p2p
  int peer = -1;
  int channel = 0;
  std::int64_t tag = 0;
  // collective / p2p bytes (program.proto: nccl-tests' S) and float elements
  std::int64_t bytes = 0;
  std::size_t elements = 0;
  // replay: a peer or group member is not executed; the op ends at
  // max(reached, t0 + predicted.start_ns) + (predicted.end_ns - predicted.start_ns)
  bool emulated = false;
  PredictedSpan predicted{};
  // events
  int event = 0;
  std::int64_t value = 0;
  std::string label;  // "rank 0 stream 1 (tp_comm) op 12"
  std::string what;   // "all_reduce 4096 B on group 3", for reports
};

struct StreamPlan {
  int rank = 0;
  int stream = 0;
  std::string name;
  std::vector<PlannedOp> ops;
  std::vector<ir::Compute> computes;  // distinct (class, variant, shape) run by real kernels
  std::size_t buffer_a = 0;           // floats: collective / p2p buffer
  std::size_t buffer_b = 0;           // floats: all-to-all output, reduce output
};

struct Plan {
  std::vector<int> ranks;  // executed, ascending
  std::vector<StreamPlan> streams;
  std::vector<int> num_events;  // per global rank (executed ones)
  int emulated_ops = 0;         // replay only
};

struct PlanOptions {
  // Global ranks to execute; empty = all.
  std::vector<int> ranks{};
  bool apply_compute_time_scale = true;
  // Null: every peer and group member of an executed rank must be executed.
  // Set: ops with a rank outside the set are emulated from these spans (each
  // must have one, else an error naming the op).
  const ReplayTimes* replay = nullptr;
};

// Throws lacuna::Error naming the rank, stream and op for anything invalid.
Plan make_plan(const ir::Program& program, const PlanOptions& options);

std::string stream_label(int rank, int stream, const std::string& name);

}  // namespace lacuna::runtime
