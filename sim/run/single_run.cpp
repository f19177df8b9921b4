#include "sim/run/single_run.h"

#include <vector>

#include "sim/report/observers/bubble_accounting.h"
#include "sim/report/analyses/link_summary.h"

namespace lacuna::run {

SimulatedRun simulate(const ir::Program& program, const cost::CostModel& cost, NetworkMode mode,
                      const engine::SimulationOptions& options, std::span<engine::Observer* const> observers) {
  const NetworkSetup network(program, mode);
  engine::Simulator sim(program, cost, network.apply(options));
  for (engine::Observer* o : observers) sim.add_observer(o);
  SimulatedRun out;
  out.result = sim.run();
  out.models = network.describe(cost);
  return out;
}

SummarizedRun simulate_and_summarize(const ir::Program& program, const cost::CostModel& cost, NetworkMode mode,
                                     bool fold, std::span<engine::Observer* const> observers) {
  report::BubbleAccounting accounting;
  std::vector<engine::Observer*> all = {&accounting};
  all.insert(all.end(), observers.begin(), observers.end());
  SummarizedRun out;
  out.run = simulate(program, cost, mode, engine::SimulationOptions{.fold = fold}, all);
  out.summary = report::summarize(program, accounting, out.run.models, fold);
  report::check_mfu(out.summary);
  return out;
}

void add_network_sections(report::Summary& summary, const report::CommAccounting& comm, const NetworkSetup& network,
                          TimeNs end) {
  summary.comm = report::summarize_comm(comm);
  summary.links = network.flow() != nullptr
                      ? report::summarize_links(network.flow()->links(), network.flow()->link_stats(end))
                      : report::analytic_links();
}

}  // namespace lacuna::run
