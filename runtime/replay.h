// Replay mode: execute some ranks of a program for real and emulate the rest
// from a prediction (issue 6; docs/executor.md#replay). A collective or a
// send/recv of an executed rank that involves a rank which is not executed
// does not move data: it ends at
//     max(reached, iteration start + predicted start) + predicted duration,
// where "predicted" is the simulator's span of that very op on that rank.
// So a receive waits for the simulated arrival, a send completes after the
// simulated transfer time, and the compute side (and every encoder kernel
// placed in a bubble) runs on real hardware.
#pragma once

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include <string>

#include "sim/engine/observer.h"
#include "sim/proto/trace.pb.h"

namespace lacuna::runtime {

struct PredictedSpan {
  std::int64_t start_ns = 0;  // the op began (all members / both sides there)
  std::int64_t end_ns = 0;
};

// Predicted spans of the communication ops of the ranks to replay, keyed by
// (rank, stream, op). Fill it by adding a ReplayRecorder to a simulation of
// the same program.
class ReplayTimes {
 public:
  void set(int rank, int stream, int op, PredictedSpan span) { spans_[{rank, stream, op}] = span; }
  const PredictedSpan* find(int rank, int stream, int op) const {
    const auto it = spans_.find({rank, stream, op});
    return it == spans_.end() ? nullptr : &it->second;
  }
  std::size_t size() const { return spans_.size(); }
  // The predicted iteration time of the simulation the spans came from.
  std::int64_t iteration_ns = 0;

 private:
  std::map<std::tuple<int, int, int>, PredictedSpan> spans_;
};

// Records, during a simulation, the collectives and sends/recvs of `ranks`
// (global ranks; empty = every rank) into `out`.
class ReplayRecorder : public engine::Observer {
 public:
  ReplayRecorder(ReplayTimes& out, std::vector<int> ranks);
  void on_run_begin(const engine::RunInfo& info) override;
  void on_op_end(const engine::OpSpan& span) override;
  void on_run_end(TimeNs end) override;

 private:
  ReplayTimes& out_;
  std::vector<int> ranks_;
  std::vector<bool> wanted_;  // per global rank
};

// The same from a saved prediction (`lacuna simulate --spans FILE`, a trace
// already checked by report::parse_span_trace): the communication spans of
// `ranks` (empty = every rank of the program). Throws lacuna::Error naming
// `file` when the trace is not a prediction of this very program (its
// program_digest), is of several iterations, lacks one of `ranks`, or names
// an op the program does not have.
ReplayTimes replay_times_from_trace(const ir::Program& program, const trace::Trace& trace,
                                    const std::vector<int>& ranks, const std::string& file);

}  // namespace lacuna::runtime
