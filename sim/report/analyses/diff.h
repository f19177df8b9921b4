// `lacuna diff PREDICTED.json MEASURED.json`: a prediction (`lacuna simulate
// --json`) against a measurement (`lacuna execute --json`) of the same
// program, compared through the per-op `timeline` both files carry
// (docs/diff.md). This file parses the two documents, checks that they
// describe the same program, and computes the errors: iteration time, per op
// class, per stream, and the compute-stream bubbles that one run has and the
// other has not. The terminal text and the --json output are in diff_format.h;
// the picture in diff_svg.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lacuna::report {

// One op of a timeline: [op, class, phase, microbatch, module, ready, start, end].
struct DiffOp {
  int32_t op = 0;          // index of the op in its stream in the program
  int32_t cls = 0;         // index into DiffInput::classes
  int32_t phase = 0;       // ir::Phase
  int32_t microbatch = -1;
  int32_t module = 0;      // 0 the LLM, > 0 an encoder
  int64_t ready_ns = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

struct DiffStream {
  int32_t stream = 0;
  std::string name;  // "compute", "tp", ...
  std::string kind;  // lower-case StreamKind: "compute", "tp_comm", ...
  std::vector<DiffOp> ops;
};

struct DiffRank {
  int32_t rank = 0;
  std::string label;
  std::vector<DiffStream> streams;
};

// ranks[].bubble_s of one rank, in the file's key order, converted to ns.
struct DiffRankBubbles {
  int32_t rank = 0;
  std::vector<std::pair<std::string, int64_t>> by_category_ns;
};

// Bounds every reader of `diff`'s inputs applies (the JSON's and the span
// trace's), so that no sum `diff` forms can overflow int64
// (docs/reliability.md): no time above 10^15 ns (11.6 days;
// ir::validate_program bounds an op's duration the same way, so lacuna never
// writes more), and op durations and bubbles each adding up to at most
// 2^62 ns over a file.
inline constexpr int64_t kMaxDiffTimeNs = 1'000'000'000'000'000;
inline constexpr int64_t kMaxDiffTotalNs = int64_t{1} << 62;

// What `lacuna diff` needs of one JSON document or span trace.
struct DiffInput {
  std::string file;  // for messages
  // ProgramInfo.content_digest of the program that ran; empty in files of an
  // older lacuna (then scenario and num_gpus stand in for it).
  std::string program_digest;
  std::string scenario;
  std::string cost_model;
  std::string mode;
  int64_t num_gpus = 0;
  int64_t iteration_time_ns = 0;
  std::vector<std::string> classes;
  std::vector<DiffRank> ranks;  // timeline.ranks, in file order
  std::vector<DiffRankBubbles> rank_bubbles;

  const DiffRank* find_rank(int32_t rank) const;
};

// Parses `json_text`; `file` names the document in errors. Throws
// lacuna::Error naming the file and the key for malformed JSON, a missing or
// mistyped key, or a document without `timeline`.
DiffInput parse_diff_input(std::string_view json_text, const std::string& file);
// Parses a file's bytes: a span trace (sim/report/formats/span_trace.h) when
// looks_like_span_trace, else the JSON.
DiffInput parse_diff_file(std::string_view bytes, const std::string& file);
// Reads and parses `path`: the JSON of --json, or the span trace of --spans
// (sim/report/formats/span_trace.h), told apart by their first byte (lacuna::Error
// if unreadable or neither).
DiffInput load_diff_input(const std::string& path);

// --- the comparison ---------------------------------------------------------

struct ClassDiff {
  std::string cls;  // the op-class key, e.g. "compute GEMM", "collective AR tp"
  int64_t ops = 0;
  int64_t predicted_ns = 0;  // sum of end − start
  int64_t measured_ns = 0;
  std::optional<double> error;  // (predicted − measured) / measured; unset when measured is 0
};

struct StreamDiff {
  int32_t rank = 0;
  int32_t stream = 0;
  std::string name;
  std::string kind;
  int64_t ops = 0;
  int64_t predicted_busy_ns = 0;
  int64_t measured_busy_ns = 0;
  std::optional<double> error;
  int64_t predicted_end_ns = 0;  // the stream's last op end (0: no ops)
  int64_t measured_end_ns = 0;
};

// A gap on a rank's main compute stream present as a bubble in one run only.
// The gap before op `op` runs from the previous listed op's end (0 for the
// first op) to the op's start; op = -1 is the tail, last end → iteration end.
struct BubbleMismatch {
  int32_t rank = 0;
  int32_t stream = 0;
  int32_t op = -1;
  std::string cls;  // the op's class; empty for the tail
  int32_t phase = 0;
  int32_t microbatch = -1;
  int32_t module = 0;
  int64_t predicted_from_ns = 0;  // where the gap begins in each run
  int64_t predicted_gap_ns = 0;
  int64_t measured_from_ns = 0;
  int64_t measured_gap_ns = 0;
};

// One ranks[].bubble_s category summed over the compared ranks.
struct BubbleCategoryDiff {
  std::string category;
  int64_t predicted_ns = 0;
  int64_t measured_ns = 0;
  std::optional<double> error;
};

struct DiffOptions {
  // A compute-stream gap is a bubble when at least this long; unset: 1 % of
  // the predicted iteration time.
  std::optional<int64_t> min_bubble_ns;
};

struct DiffReport {
  std::string predicted_file, measured_file;
  std::string scenario;
  int64_t num_gpus = 0;
  std::string predicted_cost_model, measured_cost_model;
  int64_t predicted_iteration_ns = 0;
  int64_t measured_iteration_ns = 0;
  std::optional<double> iteration_error;

  std::vector<int32_t> compared_ranks;  // in both timelines, predicted file's order
  std::vector<int32_t> only_predicted_ranks, only_measured_ranks;

  std::vector<ClassDiff> classes;  // by measured time, descending
  std::vector<StreamDiff> streams;  // compared ranks' order, then stream order

  int64_t min_bubble_ns = 0;
  bool min_bubble_default = true;  // the 1 % default, not --min-bubble-us
  int64_t predicted_bubbles = 0;   // gaps ≥ threshold on the compared compute streams
  int64_t measured_bubbles = 0;
  int64_t matched_bubbles = 0;     // a bubble in both runs
  std::vector<BubbleMismatch> predicted_not_observed;  // by predicted gap, descending
  std::vector<BubbleMismatch> observed_not_predicted;  // by measured gap, descending
  // ranks[].bubble_s summed over the compared ranks that have an entry in both
  // files; ranks without one are listed in bubble_ranks_missing.
  std::vector<BubbleCategoryDiff> bubble_categories;
  std::vector<int32_t> bubble_ranks_missing;
};

// (predicted − measured) / measured; unset when measured is 0.
std::optional<double> relative_error(int64_t predicted, int64_t measured);

// Compares two runs of one program. Throws lacuna::Error naming the file,
// rank, stream and op when they are not the same program (scenario, GPU count,
// streams, op indexes or classes differ).
DiffReport diff_runs(const DiffInput& predicted, const DiffInput& measured, const DiffOptions& options = {});

// The index in `r.streams` of the rank's main compute stream (the first of
// kind "compute"), -1 if it has none: the stream whose gaps are bubbles.
int main_compute_stream(const DiffRank& r);

// "F", "B", "W", "R", "opt", "dp", "-" (unspecified).
std::string phase_letter(int32_t phase);

}  // namespace lacuna::report
