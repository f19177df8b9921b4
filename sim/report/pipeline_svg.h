// The pipeline picture (--svg): one row per drawn rank with its compute stream
// as the main lane (idle time hatched light red) and a thin lane per kind of
// communication (TP, CP, PP, DP) below it; time axis in ms; legend; title.
// Consecutive compute ops of the same (phase, microbatch, chunk) (B and W of
// one backward pass together), and communication ops of one lane, closer than
// a pixel merge into one rectangle so a 30,000-op rank stays a few hundred
// elements.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "sim/engine/observer.h"
#include "sim/proto/program.pb.h"
#include "sim/report/comm_kind.h"
#include "sim/report/rank_spec.h"

namespace lacuna::report {

class PipelineSvg : public engine::Observer {
 public:
  PipelineSvg(const ir::Program& program, RankSpec spec);

  void on_run_begin(const engine::RunInfo& info) override;
  void on_op_end(const engine::OpSpan& span) override;
  void on_run_end(TimeNs end) override;

  // The standalone SVG document; call after the run.
  std::string render() const;
  const std::vector<int32_t>& drawn_ranks() const { return ranks_; }

 private:
  struct ComputeSpan {
    int64_t start, end;
    int32_t microbatch;
    int16_t chunk;
    uint8_t phase;
  };
  struct Span {
    int64_t start, end;
  };
  static bool same_pass(const ComputeSpan& a, const ComputeSpan& b);
  static constexpr int kLanes = 4;  // TP, CP, PP, DP
  struct Row {
    int32_t rank = 0;
    int32_t main_stream = -1;
    std::vector<ComputeSpan> compute;
    std::array<std::vector<Span>, kLanes> comm;
  };

  const ir::Program& program_;
  RankSpec spec_;
  std::vector<int32_t> ranks_;
  std::vector<int32_t> row_of_rank_;
  std::vector<Row> rows_;
  TimeNs end_;
};

}  // namespace lacuna::report
