// Running the points of `lacuna sweep` (docs/sweep.md): each point is
// validated before any runs, then runs exactly as `lacuna simulate SCENARIO
// --set …` would (same input loading, same run settings), over the threads
// and MPI processes of the run (sim/parallel/work_split.h). A point's result
// travels as a record (report::metrics_record), so the root's outputs are the
// same bytes however the points were spread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/core/work_journal.h"
#include "sim/parallel/processes.h"
#include "sim/parallel/work_split.h"
#include "sim/report/analyses/run_metrics.h"
#include "sim/run/batch_estimate.h"
#include "sim/run/network_setup.h"
#include "sim/run/simulation_input.h"
#include "sim/scenario/edits.h"
#include "sim/sweep/sweep_grid.h"

namespace lacuna::sweep {

// What every point shares: simulate's flags as the sweep got them.
struct SweepSettings {
  std::string scenario;  // the scenario file
  run::CalibrationChoice calibration;
  int64_t scale_down = 1;
  bool fold = false;
  run::NetworkMode network = run::NetworkMode::kFlow;
  int32_t samples = 0;  // --samples K per point; 0: none
  int64_t seed = -1;    // --seed S; -1: the scenario's
  bool ideal = false;   // --ideal
  // Where finished points are logged, so that an interrupted sweep can be
  // resumed ("": no journal), and whether to reuse that journal's points.
  std::string journal;
  bool resume = false;
  // --max-memory-gb: this machine's memory for the points in flight (< 0:
  // 80 % of it; 0: no limit), checked before the first point runs.
  double max_memory_gb = -1;
};

// The journal of a sweep's finished points (sim/core/work_journal.h): each
// record a point's metrics (report::metrics_record), checked as the sweep
// reads it; the run's identity hashes the scenario file, every point's
// assignments and the settings that change a point's result
// (docs/sweep.md#interrupted-sweeps).
extern const JournalKind kSweepJournal;
uint64_t sweep_hash(const Grid& grid, const SweepSettings& settings);
// A journal record as the sweep reads it: a run's metrics, MFU in (0, 1],
// GPUs ≥ 1, a positive iteration time. Throws lacuna::Error at `where`.
void check_sweep_record(const std::string& record, const SourceLocation& where);

// The edits of `point`: the grid's --set assignments in axis order, then
// --ideal and --seed, as `lacuna simulate` applies them.
scenario::ScenarioEdits point_edits(const Grid& grid, size_t point, const SweepSettings& settings);

// "sweep point 3 of 6 (cluster.num_nodes=7, training.global_batch=96)"
std::string point_label(const Grid& grid, size_t point);

struct ValidatedSweep {
  std::string scenario_name;  // the first point's scenario name
  bool multimodal = false;    // any point has encoders
  // Each point's expected cost for the work split: GPUs × microbatches, a
  // proxy for the events a run processes.
  std::vector<double> costs;
};

// Checks everything before anything runs: a scenario (not a compiled .pb),
// every swept value at its field (check_fields), the calibration profile,
// and every point loaded and validated like a file. Throws lacuna::Error; a
// point's error starts with point_label.
ValidatedSweep validate_sweep(const Grid& grid, const SweepSettings& settings);

// Runs `point` and returns its metrics record. Errors start with point_label.
std::string run_point(const Grid& grid, size_t point, const SweepSettings& settings);

// Told, on the root, what the points to run will cost once each is compiled,
// before the first runs (docs/performance.md#batch-estimate).
using SweepEstimated = std::function<void(const run::BatchEstimate&)>;

// Every point, dealt over `world`'s processes by `costs` and run on `jobs`
// threads in each; on the root the metrics of every point in point order,
// elsewhere an empty vector. Each point to run is compiled and its run
// estimated first; the batch is refused (lacuna::Error naming
// --max-memory-gb) when the points in flight at once would not fit
// settings.max_memory_gb. `done` as in parallel::map_items (the runs only).
// With settings.journal, each finished point is logged there (".<rank>"
// added on the other processes: journal_paths), and with settings.resume the
// points the journals hold are taken from them instead of run (`resumed`
// gets how many).
std::vector<report::RunMetrics> run_sweep(const parallel::World& world, const Grid& grid, const SweepSettings& settings,
                                          int jobs, const std::vector<double>& costs,
                                          const parallel::ItemDone& done = {}, size_t* resumed = nullptr,
                                          const SweepEstimated& on_estimate = {});


}  // namespace lacuna::sweep
