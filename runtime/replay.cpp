#include "runtime/replay.h"

#include <utility>

namespace lacuna::runtime {

ReplayRecorder::ReplayRecorder(ReplayTimes& out, std::vector<int> ranks) : out_(out), ranks_(std::move(ranks)) {}

void ReplayRecorder::on_run_begin(const engine::RunInfo& info) {
  const int n = info.program->ranks_size();
  wanted_.assign(static_cast<std::size_t>(n), ranks_.empty());
  for (int r : ranks_) {
    if (r >= 0 && r < n) wanted_[static_cast<std::size_t>(r)] = true;
  }
}

void ReplayRecorder::on_op_end(const engine::OpSpan& span) {
  if (!wanted_[static_cast<std::size_t>(span.rank)]) return;
  const auto kind = span.ir->kind_case();
  if (kind != ir::Op::kCollective && kind != ir::Op::kSend && kind != ir::Op::kRecv) return;
  out_.set(span.rank, span.stream, span.op, PredictedSpan{span.start.count(), span.end.count()});
}

void ReplayRecorder::on_run_end(TimeNs end) { out_.iteration_ns = end.count(); }

}  // namespace lacuna::runtime
