// One `lacuna simulate` run, assembled: the program's variability as the
// engine's perturbation and the flow network's link variation, the run's
// seed, the bubble and communication accounting, the Monte Carlo samples
// (--samples K) and the summary with every section the run itself knows.
// The CLI adds its output observers (trace, SVG, timeline, critical path)
// and prints.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "sim/cost/cost_model.h"
#include "sim/engine/simulator.h"
#include "sim/network/flow_comm_model.h"
#include "sim/proto/program.pb.h"
#include "sim/report/observers/bubble_accounting.h"
#include "sim/report/observers/comm_accounting.h"
#include "sim/report/analyses/summary.h"
#include "sim/run/monte_carlo_runner.h"
#include "sim/run/network_setup.h"
#include "sim/run/run_estimate.h"
#include "sim/variability/variability_model.h"

namespace lacuna::run {

struct RunSettings {
  bool fold = false;
  int32_t compute_slots = 0;  // 0: no limit
  NetworkMode network = NetworkMode::kFlow;
  SamplingPlan sampling;     // its seed is ignored: see seed_override
  int64_t seed_override = -1;  // --seed; -1: the program's variability seed
  // Told how far the observed run (sample 0) is; not the other samples,
  // which run on other threads. Not owned; null: none.
  engine::ProgressSink* progress = nullptr;
};

class SimulationRun {
 public:
  // Throws lacuna::Error for a setting the program cannot take (--fold with
  // a source of variability that cannot fold, links with --network analytic).
  SimulationRun(const ir::Program& program, const cost::CostModel& cost, const RunSettings& settings);

  // Observers beyond the accounting, attached in this order after it.
  void add_observer(engine::Observer* observer);
  void add_link_observer(network::LinkObserver* observer) { network_.add_link_observer(observer); }

  // The observed run (sample 0, with every observer), then samples 1..K-1
  // bare; the summary with comm, links, Monte Carlo and variability.
  report::Summary run();

  // The events and memory run() will need (docs/performance.md#estimate),
  // from the program alone: call it before run() to refuse a run that
  // cannot fit (check_run_memory).
  RunEstimate estimate() const { return estimate_run(program_, base_, settings_.sampling, settings_.network); }

  // The iteration time with another cost model, keeping the run's draws
  // (same perturbation, same link variation): --sensitivity's re-runs.
  TimeNs resimulate(const cost::CostModel& scaled) const;

  uint64_t seed() const { return seed_; }
  uint64_t events() const { return events_; }
  // The flow network of the last run (null in analytic mode or when unused):
  // its solver's counters for benchmarks.
  const network::FlowCommModel* flow_network() const { return network_.flow(); }
  double wall_seconds() const { return wall_seconds_; }

 private:
  const ir::Program& program_;
  const cost::CostModel& cost_;
  RunSettings settings_;
  uint64_t seed_ = 0;
  std::unique_ptr<variability::VariabilityModel> perturbation_;
  NetworkSetup network_;
  engine::SimulationOptions base_;
  report::BubbleAccounting accounting_;
  report::CommAccounting comm_;
  std::vector<engine::Observer*> observers_;
  uint64_t events_ = 0;
  double wall_seconds_ = 0;
};

}  // namespace lacuna::run
