#include "sim/report/formats/span_trace.h"

#include <limits>
#include <set>

#include <fmt/format.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "sim/core/error.h"
#include "sim/core/quiet_protobuf.h"

namespace lacuna::report {
namespace {

class Checker {
 public:
  explicit Checker(const std::string& file) : file_(file) {}
  [[noreturn]] void fail(const std::string& field, const std::string& what, const std::string& fix = {}) const {
    throw Error(SourceLocation{file_, 0, 0, field}, what, fix);
  }
  void time(const std::string& field, int64_t ns) const {
    if (ns < 0 || ns > kMaxDiffTimeNs) fail(field, fmt::format("{} ns is not a time in [0, 10^15] ns", ns));
  }

 private:
  const std::string& file_;
};

void check_span(const Checker& in, const trace::Span& s, const std::string& field, int num_classes, int iterations) {
  if (s.op() < 0) in.fail(field + ".op", fmt::format("op index {} is negative", s.op()));
  if (s.op_class() < 0 || s.op_class() >= num_classes) {
    in.fail(field + ".op_class",
            fmt::format("{} is not an index into op_classes ({} classes)", s.op_class(), num_classes));
  }
  if (!ir::Phase_IsValid(s.phase())) {
    in.fail(field + ".phase", fmt::format("unknown phase {}", static_cast<int>(s.phase())));
  }
  if (s.microbatch() < -1) in.fail(field + ".microbatch", fmt::format("{} is below -1 (none)", s.microbatch()));
  if (s.module() < 0) in.fail(field + ".module", fmt::format("{} is negative", s.module()));
  if (s.iteration() < 0 || s.iteration() >= iterations) {
    in.fail(field + ".iteration",
            fmt::format("{} is not in [0, {}) (the trace's iterations)", s.iteration(), iterations));
  }
  in.time(field + ".ready_ns", s.ready_ns());
  in.time(field + ".start_ns", s.start_ns());
  in.time(field + ".end_ns", s.end_ns());
  if (s.end_ns() < s.start_ns()) {
    in.fail(field, fmt::format("the op ends before it starts (start {} ns, end {} ns)", s.start_ns(), s.end_ns()));
  }
}

}  // namespace

std::string span_trace_bytes(const trace::Trace& trace, const std::string& option) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    if (!trace.SerializeToCodedStream(&coded)) {
      throw Error(SourceLocation{{}, 0, 0, option}, "the span trace is larger than protobuf's 2 GiB limit",
                  "trace fewer ranks (one pipeline, or one stage)");
    }
  }
  return out;
}

bool looks_like_span_trace(std::string_view bytes) {
  if (bytes.empty()) return false;
  const unsigned char c = static_cast<unsigned char>(bytes.front());
  return !(c == '{' || c == '[' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == 0xEF);
}

trace::Trace parse_span_trace(std::string_view bytes, const std::string& file) {
  const Checker in(file);
  trace::Trace t;
  const QuietProtobuf quiet;
  if (!t.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    in.fail({}, "neither JSON nor a span trace (trace.proto) that protobuf can parse",
            "pass a file written by `lacuna simulate` or `lacuna execute` with ‹json› or ‹spans›");
  }
  if (t.format_version() != kSpanTraceFormatVersion) {
    in.fail("format_version",
            fmt::format("{}: this lacuna reads span traces of format {}", t.format_version(), kSpanTraceFormatVersion),
            "write it again with ‹spans› of this lacuna");
  }
  if (t.origin() != trace::PREDICTION && t.origin() != trace::MEASUREMENT) {
    in.fail("origin", fmt::format("{} is neither PREDICTION nor MEASUREMENT", static_cast<int>(t.origin())));
  }
  if (t.num_gpus() < 1) in.fail("num_gpus", fmt::format("{} GPUs", t.num_gpus()));
  in.time("iteration_time_ns", t.iteration_time_ns());
  if (t.iterations() < 1) in.fail("iterations", fmt::format("{} iterations (at least 1)", t.iterations()));
  std::set<int32_t> seen;
  int64_t busy_ns = 0, bubble_ns = 0;
  for (int r = 0; r < t.ranks_size(); ++r) {
    const trace::TraceRank& rank = t.ranks(r);
    const std::string rf = fmt::format("ranks[{}]", r);
    if (rank.rank() < 0 || rank.rank() >= t.num_gpus()) {
      in.fail(rf + ".rank", fmt::format("rank {} out of range (the trace has {} GPUs)", rank.rank(), t.num_gpus()));
    }
    if (!seen.insert(rank.rank()).second) in.fail(rf + ".rank", fmt::format("rank {} appears twice", rank.rank()));
    std::set<int32_t> streams;
    for (int s = 0; s < rank.streams_size(); ++s) {
      const trace::TraceStream& stream = rank.streams(s);
      const std::string sf = fmt::format("{}.streams[{}]", rf, s);
      if (stream.stream() < 0 || !streams.insert(stream.stream()).second) {
        in.fail(sf + ".stream", fmt::format("stream {} is negative or listed twice", stream.stream()));
      }
      for (int k = 0; k < stream.spans_size(); ++k) {
        const trace::Span& span = stream.spans(k);
        check_span(in, span, fmt::format("{}.spans[{}]", sf, k), t.op_classes_size(), t.iterations());
        busy_ns += span.end_ns() - span.start_ns();  // ≤ 10^15 each: no overflow before the check
        if (busy_ns > kMaxDiffTotalNs) in.fail(sf, "the ops' durations add up to more than 2^62 ns over the file");
      }
    }
    for (int b = 0; b < rank.bubbles_size(); ++b) {
      const std::string bf = fmt::format("{}.bubbles[{}]", rf, b);
      in.time(bf + ".ns", rank.bubbles(b).ns());
      bubble_ns += rank.bubbles(b).ns();
      if (bubble_ns > kMaxDiffTotalNs) in.fail(bf, "the bubbles add up to more than 2^62 ns over the file");
    }
  }
  return t;
}

DiffInput diff_input_from_trace(const trace::Trace& t, const std::string& file) {
  if (t.iterations() != 1) {
    throw Error(SourceLocation{file, 0, 0, "iterations"},
                fmt::format("a trace of {} iterations: lacuna diff compares one iteration", t.iterations()),
                "write the prediction with `lacuna simulate` and ‹spans›, without ‹iterations› (or ‹iterations 1›)");
  }
  DiffInput out;
  out.file = file;
  out.program_digest = t.program_digest();
  out.scenario = t.scenario();
  out.cost_model = t.cost_model();
  out.mode = t.mode();
  out.num_gpus = t.num_gpus();
  out.iteration_time_ns = t.iteration_time_ns();
  out.classes.assign(t.op_classes().begin(), t.op_classes().end());
  for (const trace::TraceRank& r : t.ranks()) {
    DiffRank rank;
    rank.rank = r.rank();
    rank.label = r.label();
    for (const trace::TraceStream& s : r.streams()) {
      DiffStream ds;
      ds.stream = s.stream();
      ds.name = s.name();
      ds.kind = s.kind();
      ds.ops.reserve(static_cast<size_t>(s.spans_size()));
      for (const trace::Span& sp : s.spans()) {
        DiffOp op;
        op.op = sp.op();
        op.cls = sp.op_class();
        op.phase = sp.phase();
        op.microbatch = sp.microbatch();
        op.module = sp.module();
        op.ready_ns = sp.ready_ns();
        op.start_ns = sp.start_ns();
        op.end_ns = sp.end_ns();
        ds.ops.push_back(op);
      }
      rank.streams.push_back(std::move(ds));
    }
    out.ranks.push_back(std::move(rank));
    DiffRankBubbles b;
    b.rank = r.rank();
    for (const trace::BubbleTime& bt : r.bubbles()) b.by_category_ns.emplace_back(bt.category(), bt.ns());
    out.rank_bubbles.push_back(std::move(b));
  }
  return out;
}

}  // namespace lacuna::report
