// `lacuna simulate --critical-path / --sensitivity / --stragglers / --heatmap`
// (docs/critical-path.md): the observers that record the executed op graph
// and the collective arrivals, the report sections they fill, the critical
// path in the trace, the "what if op class X were faster" re-simulations and
// the heat-map SVG. Kept out of cmd_simulate.cpp, which only wires it in.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "sim/core/atomic_file.h"
#include "sim/cost/cost_model.h"
#include "sim/engine/observer.h"
#include "sim/proto/program.pb.h"
#include "sim/report/observers/op_graph_recorder.h"
#include "sim/report/observers/stragglers.h"
#include "sim/report/analyses/summary.h"
#include "sim/report/formats/trace_writer.h"

namespace lacuna::cli {

struct CriticalPathOptions {
  bool critical_path = false;
  bool sensitivity = false;       // implies critical_path
  int32_t sensitivity_classes = 3;
  double speedup = 0.10;          // "10 % faster"
  bool stragglers = false;        // implied by critical_path and heatmap
  std::string heatmap;            // SVG path, empty: none
  // Whole graph (slack) up to this many ops of the simulated ranks, else the
  // binding chains only (docs/critical-path.md#size).
  uint64_t whole_graph_max_ops = 4'000'000;

  bool any() const { return critical_path || sensitivity || stragglers || !heatmap.empty(); }
};

void add_critical_path_options(CLI::App* sub, CriticalPathOptions& options);

class CriticalPathOutputs {
 public:
  // Opens the heat map under a temporary name (an unwritable path fails
  // before the run). Nothing is recorded when no option asks for it.
  CriticalPathOutputs(const ir::Program& program, const CriticalPathOptions& options);

  // Attach before the trace writer: the trace's epilogue reads the path,
  // which the recorder computes in its own on_run_end.
  std::vector<engine::Observer*> observers();
  // Marks the path in the trace (docs/critical-path.md#trace).
  void attach_trace(report::TraceWriter* trace);

  // Runs the simulation again with a cost model; returns the iteration time.
  using Resimulate = std::function<TimeNs(const cost::CostModel& cost)>;
  // After the run, before the other outputs are committed: fills
  // summary.critical_path and summary.stragglers, re-simulates for
  // --sensitivity and renders the heat map (not yet renamed into place).
  void finish(report::Summary& summary, const std::vector<int32_t>& traced_ranks, const cost::CostModel& cost,
              const Resimulate& resimulate);
  // Renames the heat map into place (only after a run that succeeded).
  void commit();
  // "  heatmap PATH  (N GPUs)\n" (after a blank line when `first`), or "".
  std::string describe(bool first) const;

 private:
  const ir::Program& program_;
  CriticalPathOptions options_;
  std::optional<report::OpGraphRecorder> recorder_;
  std::optional<report::StragglerAttribution> stragglers_;
  std::optional<AtomicFile> heatmap_file_;
};

// Fills `sensitivity[i].resimulated*` for the first `classes` entries: the
// iteration time with that op class's compute scaled by 1 − speedup.
void resimulate_sensitivity(report::CriticalPathReport& report, int32_t classes, const cost::CostModel& cost,
                            const CriticalPathOutputs::Resimulate& resimulate);

}  // namespace lacuna::cli
