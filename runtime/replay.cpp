#include "runtime/replay.h"

#include <set>
#include <utility>

#include "sim/core/error.h"
#include "sim/ir/bound_program.h"
#include "sim/ir/digest.h"

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

ReplayTimes replay_times_from_trace(const ir::Program& program, const trace::Trace& trace,
                                    const std::vector<int>& ranks, const std::string& file) {
  auto fail = [&](const std::string& field, const std::string& what, const std::string& fix) {
    throw Error(SourceLocation{file, 0, 0, field}, what, fix);
  };
  const std::string simulate_again =
      "save the prediction again: lacuna simulate INPUT --spans FILE --trace-ranks RANKS, with the INPUT, flags and "
      "ranks of this execute";
  if (trace.origin() != trace::PREDICTION) {
    fail("origin", "a measurement, not a prediction: replay emulates the ranks it does not run from a simulation",
         simulate_again);
  }
  const std::string digest = ir::content_digest(program);
  if (trace.program_digest() != digest) {
    fail("program_digest",
         "a prediction of program " + trace.program_digest() + ", but this execute runs program " + digest,
         simulate_again);
  }
  if (trace.iterations() != 1) {
    fail("iterations", "a prediction of " + std::to_string(trace.iterations()) + " iterations; replay takes one",
         "simulate without --iterations");
  }
  const ir::BoundProgram bound(program);
  std::set<int> traced;
  ReplayTimes out;
  out.iteration_ns = trace.iteration_time_ns();
  std::vector<bool> wanted(static_cast<size_t>(program.ranks_size()), ranks.empty());
  for (int r : ranks) wanted[static_cast<size_t>(r)] = true;
  for (int i = 0; i < trace.ranks_size(); ++i) {
    const trace::TraceRank& tr = trace.ranks(i);
    const std::string rf = "ranks[" + std::to_string(i) + "]";
    if (tr.rank() < 0 || tr.rank() >= bound.num_ranks()) {
      fail(rf + ".rank", "not a rank of the program", simulate_again);
    }
    traced.insert(tr.rank());
    if (!wanted[static_cast<size_t>(tr.rank())]) continue;
    const ir::RankClass& cls = bound.rank_class(tr.rank());
    for (int s = 0; s < tr.streams_size(); ++s) {
      const trace::TraceStream& ts = tr.streams(s);
      const std::string sf = rf + ".streams[" + std::to_string(s) + "]";
      if (ts.stream() < 0 || ts.stream() >= cls.streams_size()) {
        fail(sf + ".stream", "not a stream of the rank", simulate_again);
      }
      const ir::Stream& stream = cls.streams(ts.stream());
      for (const trace::Span& span : ts.spans()) {
        if (span.op() < 0 || span.op() >= stream.ops_size()) {
          fail(sf, "names an op the stream does not have", simulate_again);
        }
        const auto kind = stream.ops(span.op()).kind_case();
        if (kind != ir::Op::kCollective && kind != ir::Op::kSend && kind != ir::Op::kRecv) continue;
        out.set(tr.rank(), ts.stream(), span.op(), PredictedSpan{span.start_ns(), span.end_ns()});
      }
    }
  }
  for (int r = 0; r < bound.num_ranks(); ++r) {
    if (!wanted[static_cast<size_t>(r)] || traced.count(r)) continue;
    fail("ranks", "no spans of rank " + std::to_string(r) + ", which this execute runs (the prediction traced " +
                      (trace.selection().empty() ? std::string("no ranks") : "'" + trace.selection() + "'") + ")",
         "save the prediction with --trace-ranks covering the executed ranks (--trace-ranks all covers every rank)");
  }
  return out;
}

}  // namespace lacuna::runtime
