// The per-op timeline of the traced ranks, kept for the JSON summary's
// `timeline` key (docs/outputs.md#timeline) so that `lacuna diff` can compare
// a prediction with a measurement op by op. Both `lacuna simulate` and
// `lacuna execute` fill it through the same observer interface, so the two
// files have the same ops in the same order.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sim/engine/observer.h"
#include "sim/proto/program.pb.h"
#include "sim/report/analyses/rank_spec.h"

namespace lacuna::report {

struct TimelineOp {
  int32_t op = 0;            // index in its stream (records and waits are not kept)
  int32_t class_index = 0;   // into Timeline::classes
  int32_t phase = 0;         // ir::Phase
  int32_t microbatch = -1;   // -1: none
  int32_t module = 0;        // 0 the LLM, > 0 an encoder
  int64_t ready_ns = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int32_t iteration = 0;  // several iterations (--iterations N): the op's
};

struct TimelineStream {
  int32_t stream = 0;
  std::string name;  // Stream.name
  std::string kind;  // lower-case StreamKind: "compute", "tp_comm", ...
  std::vector<TimelineOp> ops;  // in op order
};

struct TimelineRank {
  int32_t rank = 0;
  std::string label;  // rank_label()
  std::vector<TimelineStream> streams;  // every stream of the rank, in order
};

struct Timeline {
  std::string selection;             // the --trace-ranks text
  int32_t iterations = 1;            // RunInfo::iterations
  std::vector<std::string> classes;  // op-class keys, first-seen order
  std::vector<TimelineRank> ranks;   // display order (select_ranks)
};

// The op-class key of an op (not for records and waits):
//   "compute gemm", "compute fixed" (fixed-duration compute),
//   "collective AR tp", "send pp", "recv boundary", ...
// The communication suffix is comm_kind(): tp, cp, pp, dp, boundary,
// encoder, or other.
std::string op_class_key(const ir::Program& program, const ir::Stream& stream, const ir::Op& op);

class TimelineRecorder : public engine::Observer {
 public:
  TimelineRecorder(const ir::Program& program, RankSpec spec);

  void on_run_begin(const engine::RunInfo& info) override;
  void on_op_end(const engine::OpSpan& span) override;
  void on_run_end(TimeNs end) override;

  // Valid after on_run_end.
  const Timeline& timeline() const { return timeline_; }

 private:
  int32_t class_index(const std::string& key);

  const ir::Program& program_;
  RankSpec spec_;
  Timeline timeline_;
  std::vector<int32_t> slot_of_rank_;  // global rank → index into timeline_.ranks, -1 if not kept
  std::map<std::string, int32_t> class_of_;
};

// The `timeline` value: {"selection":...,"classes":[...],"ranks":[ one line
// per rank ]}, each op as [op, class, phase, microbatch, module, ready_ns,
// start_ns, end_ns]. A run of several iterations adds "iterations": N after
// "selection" and the op's iteration as a ninth element, ops ordered by
// (iteration, op).
std::string timeline_json(const Timeline& timeline);

}  // namespace lacuna::report
