// What `lacuna sweep` prints and writes, all built on the root from the
// points' metrics in point order (docs/sweep.md#outputs): the terminal
// table, the CSV (every metric of every point), the JSON (the settings and
// every point's fields and metrics) and the line plots. None holds a wall
// time, a thread count or a process count, so serial, `-j N` and `mpirun`
// runs give the same bytes.
#pragma once

#include <string>
#include <vector>

#include "sim/report/analyses/run_metrics.h"
#include "sim/sweep/sweep_grid.h"
#include "sim/sweep/sweep_run.h"

namespace lacuna::sweep {

struct SweepResult {
  std::string scenario_name;
  Grid grid;
  SweepSettings settings;
  std::vector<report::RunMetrics> points;  // in point order
};

// The columns every point has: the multimodal bubble categories when any
// point is multimodal, the sample statistics with --samples.
report::MetricSet sweep_metric_set(const SweepResult& result);

// The names --metric takes: every metric of the CSV, the multimodal bubble
// categories included (zero in an LLM-only program). `samples`: --samples
// was given (the statistics exist).
std::vector<std::string> plottable_metrics(bool samples);
// Throws lacuna::Error naming --metric for a name not in plottable_metrics.
void check_metric_names(const std::vector<std::string>& names, bool samples);
// --metric's default.
inline const std::vector<std::string> kDefaultPlotMetrics = {"mfu", "iteration_s"};

// A markdown table: one row per point with its field values, iteration time,
// tokens/s, TFLOP/s per GPU, MFU, HFU, peak memory (a '!' over HBM) and the
// bubble categories that are not zero at every point (median per rank, ms);
// then the best point by MFU among those that fit.
std::string sweep_table(const SweepResult& result);

// point, one column per swept field (values as written), then
// report::named_metrics (docs/sweep.md#csv).
std::string sweep_csv(const SweepResult& result);

// {lacuna_version, scenario, scenario_file, settings, points: [{point,
// fields, fits, metrics}]}; one line per point.
std::string sweep_json(const SweepResult& result);

// The field on the plot's x axis: the first with more than one value (a
// single value is a setting, not a sweep), else the first.
size_t plot_axis(const Grid& grid);

// One panel per metric against plot_axis's field, one line per combination
// of the other swept fields (under --zip, one line).
std::string sweep_svg(const SweepResult& result, const std::vector<std::string>& metrics);

}  // namespace lacuna::sweep
