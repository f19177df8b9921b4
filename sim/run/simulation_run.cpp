#include "sim/run/simulation_run.h"

#include <chrono>
#include <optional>

#include "sim/run/single_run.h"
#include "sim/run/variability_setup.h"

namespace lacuna::run {
namespace {

// The run's seed is the variability's (the scenario's, or --seed); Monte
// Carlo sample i re-draws with seed S + i (docs/variability.md).
uint64_t run_seed(const ir::Program& program, int64_t seed_override) {
  return seed_override >= 0 ? static_cast<uint64_t>(seed_override)
                            : static_cast<uint64_t>(program.variability().seed());
}

}  // namespace

SimulationRun::SimulationRun(const ir::Program& program, const cost::CostModel& cost, const RunSettings& settings)
    : program_(program),
      cost_(cost),
      settings_(settings),
      seed_(run_seed(program, settings.seed_override)),
      perturbation_(make_perturbation(program, settings.fold)),
      network_(program, settings.network, /*with_variability=*/true),
      base_{.fold = settings.fold,
            .compute_slots = settings.compute_slots,
            .iterations = settings.sampling.iterations,
            .seed = seed_,
            .perturbation = perturbation_.get()} {
  settings_.sampling.seed = seed_;
}

void SimulationRun::add_observer(engine::Observer* observer) { observers_.push_back(observer); }

report::Summary SimulationRun::run() {
  engine::SimulationOptions observed_options = base_;
  observed_options.progress = settings_.progress;
  engine::Simulator sim(program_, cost_, network_.apply(observed_options));
  sim.add_observer(&accounting_);
  sim.add_observer(&comm_);
  for (engine::Observer* o : observers_) sim.add_observer(o);

  const auto t0 = std::chrono::steady_clock::now();
  engine::SimulationResult result;
  const auto observed = [&] {
    result = sim.run();
    events_ += result.events;
    return report::SampleOutcome{seed_, result.iteration_ends};
  };
  std::optional<report::MonteCarlo> monte_carlo;
  if (settings_.sampling.samples > 0) {
    monte_carlo = run_monte_carlo(program_, cost_, settings_.network, base_, settings_.sampling, observed, events_);
  } else {
    observed();
  }
  wall_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  report::Summary summary = report::summarize(program_, accounting_, network_.describe(cost_), settings_.fold);
  report::check_mfu(summary);
  add_network_sections(summary, comm_, network_, result.end_time);
  summary.monte_carlo = std::move(monte_carlo);
  summary.variability = variability_summary(program_, perturbation_.get(),
                                            network_.flow() != nullptr ? network_.flow()->flaps_started() : 0);
  return summary;
}

TimeNs SimulationRun::resimulate(const cost::CostModel& scaled) const {
  const NetworkSetup again(program_, settings_.network, /*with_variability=*/true);
  return engine::Simulator(program_, scaled, again.apply(base_)).run().end_time;
}

}  // namespace lacuna::run
