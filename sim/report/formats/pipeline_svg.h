// The pipeline picture (--svg): one row per drawn rank with its compute stream
// as the main lane (idle time hatched light red; idle waiting for the host to
// issue the next op solid olive, in the legend only when there is some) and a
// thin lane per kind of communication (TP, CP, PP, DP; boundary and encoder
// communication in multimodal programs) below it; time axis in ms; legend;
// title.
// Consecutive compute ops of the same (module, phase, microbatch, chunk) (B and
// W of one backward pass together), and communication ops of one lane, closer
// than a pixel merge into one rectangle so a 30,000-op rank stays a few
// hundred elements. Encoder compute (Op.module > 0) has its own colours.
//
// The drawing itself (render_timeline_svg) takes rows that may come from
// different programs: `lacuna compare` stacks one rank of every placement on
// one time axis.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "sim/engine/observer.h"
#include "sim/proto/program.pb.h"
#include "sim/report/analyses/comm_kind.h"
#include "sim/report/analyses/rank_spec.h"

namespace lacuna::report {

// TP, CP, PP, DP, boundary, encoder communication.
inline constexpr int kTimelineLanes = 6;

struct TimelineRow {
  struct ComputeSpan {
    int64_t start, end;
    int32_t microbatch;
    int16_t chunk;
    uint8_t phase;
    int16_t module;  // Op.module: 0 the LLM, > 0 an encoder
  };
  struct Span {
    int64_t start, end;
  };
  int32_t rank = 0;
  std::string id;        // the row's SVG id; empty: "rank<rank>"
  std::string label;     // beside the compute lane, e.g. "rank 0 (pp 0 tp 0 dp 0)"
  std::string sublabel;  // optional second line below it (compare: the rank)
  int64_t end_ns = 0;    // this row's iteration end: idle is hatched up to here
  std::string note;      // drawn in place of the lanes when the row has no timeline
  std::vector<ComputeSpan> compute;
  // [ready, issued] of compute-stream ops whose host issued them late
  // (docs/engine.md#host): the bubble category host_overhead.
  std::vector<Span> host;
  std::array<std::vector<Span>, kTimelineLanes> comm;
};

struct TimelineDocument {
  std::string title;
  std::string subtitle;
  int64_t end_ns = 0;  // the time axis spans [0, end_ns]
  // Draw a dark tick at each row's own end (rows of different lengths).
  bool mark_row_ends = false;
  std::vector<TimelineRow> rows;
};

std::string render_timeline_svg(const TimelineDocument& doc);

// The fill of an op of `phase` (ir::Phase) in these pictures; encoder ops
// (module > 0) have their own colours. Shared with `lacuna diff`'s picture.
const char* compute_fill(int phase, int module);

class PipelineSvg : public engine::Observer {
 public:
  PipelineSvg(const ir::Program& program, RankSpec spec);

  void on_run_begin(const engine::RunInfo& info) override;
  void on_op_end(const engine::OpSpan& span) override;
  void on_run_end(TimeNs end) override;

  // The standalone SVG document; call after the run.
  std::string render() const;
  const std::vector<int32_t>& drawn_ranks() const { return ranks_; }
  // The drawn rows (labelled by rank, end = iteration end); after the run.
  std::vector<TimelineRow> rows() const;
  TimeNs iteration_time() const { return end_; }

 private:
  struct Live {
    int32_t main_stream = -1;
  };

  const ir::Program& program_;
  RankSpec spec_;
  std::vector<int32_t> ranks_;
  std::vector<int32_t> row_of_rank_;
  std::vector<TimelineRow> rows_;
  std::vector<Live> live_;
  TimeNs end_;
  int32_t iterations_ = 1;  // RunInfo::iterations
};

}  // namespace lacuna::report
