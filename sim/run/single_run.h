// One simulation of a program, set up the way every command sets it up: the
// program's network (flow or analytic) around the cost model, the options,
// the observers, and the description of the models that ran. `compare`,
// `ablate`, `validate` and `execute --replay` run through here; `simulate`
// builds the same pieces itself because it adds samples, variability and the
// critical path.
#pragma once

#include <span>
#include <string>

#include "sim/cost/cost_model.h"
#include "sim/engine/observer.h"
#include "sim/engine/simulator.h"
#include "sim/proto/program.pb.h"
#include "sim/report/observers/comm_accounting.h"
#include "sim/report/analyses/summary.h"
#include "sim/run/network_setup.h"

namespace lacuna::run {

struct SimulatedRun {
  engine::SimulationResult result;
  std::string models;  // NetworkSetup::describe: "<compute model>; <network>"
};

// Runs `program` once on `cost` and a fresh network of `mode`, with
// `observers` attached in order.
SimulatedRun simulate(const ir::Program& program, const cost::CostModel& cost, NetworkMode mode,
                      const engine::SimulationOptions& options, std::span<engine::Observer* const> observers = {});

struct SummarizedRun {
  SimulatedRun run;
  report::Summary summary;  // report::summarize of the run, named by its models
};

// The same with the bubble accounting attached (first) and the summary made.
SummarizedRun simulate_and_summarize(const ir::Program& program, const cost::CostModel& cost, NetworkMode mode,
                                     bool fold, std::span<engine::Observer* const> observers = {});

// The network sections of a summary: achieved bandwidth per collective kind,
// and the busiest links (the flow network's, or the analytic note when no
// flow network ran).
void add_network_sections(report::Summary& summary, const report::CommAccounting& comm, const NetworkSetup& network,
                          TimeNs end);

}  // namespace lacuna::run
