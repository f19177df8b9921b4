// The span trace (sim/proto/trace.proto): the traced ranks' per-op spans of
// one run, keyed by (rank, stream, op) and tagged with the program's digest.
// `simulate --spans` and `execute --spans` write it from the same Timeline
// the JSON `timeline` is written from; `diff` and `execute --replay-from`
// read it (docs/outputs.md#spans).
#pragma once

#include <string>
#include <string_view>

#include "sim/proto/trace.pb.h"
#include "sim/report/analyses/diff.h"
#include "sim/report/analyses/summary.h"
#include "sim/report/observers/timeline.h"

namespace lacuna::report {

inline constexpr uint32_t kSpanTraceFormatVersion = 1;

// The trace of a finished run: `summary` gives the header and each traced
// rank's bubbles, `timeline` the spans, `program_digest` the program
// (ir::content_digest).
trace::Trace make_span_trace(const Summary& summary, const Timeline& timeline, trace::Origin origin,
                             const std::string& program_digest);

// The file's bytes: deterministic serialization (same trace, same bytes).
// `option`: the caller's name for the span trace output, in errors.
std::string span_trace_bytes(const trace::Trace& trace, const std::string& option = "spans");

// True when `bytes` look like a span trace rather than JSON: the first byte
// is not '{', whitespace or a UTF-8 byte-order mark.
bool looks_like_span_trace(std::string_view bytes);

// Parses and checks a span trace; every problem is a lacuna::Error naming
// `file` and the field ("ranks[0].streams[2].spans[7]: ends before it
// starts"): the format version, the origin, a rank listed twice, op-class
// indexes, iterations, times within 10^15 ns and sums within 2^62 ns.
trace::Trace parse_span_trace(std::string_view bytes, const std::string& file);

// What `lacuna diff` compares, from a checked trace of one iteration (a
// trace of several is refused, naming `iterations`).
DiffInput diff_input_from_trace(const trace::Trace& trace, const std::string& file);

}  // namespace lacuna::report
