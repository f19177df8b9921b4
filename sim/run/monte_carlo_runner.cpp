#include "sim/run/monte_carlo_runner.h"

#include "sim/run/variability_setup.h"
#include "sim/scenario/variability.h"

namespace lacuna::run {

bool run_is_random(const ir::Program& program, const engine::SimulationOptions& /*options*/) {
  // MoE routing draws expert loads from the seed too (docs/moe.md#load-imbalance).
  return scenario::any_random_variability(program.variability()) || variability::moe_imbalance_on(program);
}

SampleRunner bare_sample_runner(const ir::Program& program, const cost::CostModel& cost, NetworkMode network,
                                const engine::SimulationOptions& base) {
  return [&program, &cost, network, base](size_t /*index*/, uint64_t seed, uint64_t& events) {
    // The sample's own draws: the program's variability under the sample's
    // seed, as its perturbation and its links' variation.
    ir::Program sample = program;
    if (scenario::any_variability(sample.variability()) || variability::moe_imbalance_on(sample)) {
      sample.mutable_variability()->set_seed(seed);
    }
    const auto perturbation = make_perturbation(sample, base.fold);
    NetworkSetup setup(sample, network, /*with_variability=*/true);
    engine::SimulationOptions options = base;
    options.seed = seed;
    options.perturbation = perturbation.get();
    engine::Simulator sim(sample, cost, setup.apply(options));
    const engine::SimulationResult r = sim.run();
    events = r.events;
    return report::SampleOutcome{seed, r.iteration_ends};
  };
}

report::MonteCarlo run_monte_carlo(const ir::Program& program, const SamplingPlan& o, bool random,
                                   const std::function<report::SampleOutcome()>& observed, const SampleRunner& run,
                                   uint64_t& events) {
  std::vector<uint64_t> sample_events(static_cast<size_t>(o.samples), 0);
  std::vector<report::SampleOutcome> outcomes;
  if (!random) {
    outcomes.push_back(observed());
  } else {
    outcomes = report::run_samples(o.samples, o.seed, o.jobs, [&](size_t i, uint64_t seed) {
      if (i == 0) return observed();
      return run(i, seed, sample_events[i]);
    });
  }
  for (uint64_t e : sample_events) events += e;
  return report::summarize_samples(std::move(outcomes), o.samples, o.seed, !random, program.info(),
                                   program.ranks_size());
}

report::MonteCarlo run_monte_carlo(const ir::Program& program, const cost::CostModel& cost, NetworkMode network,
                                   const engine::SimulationOptions& base, const SamplingPlan& o,
                                   const std::function<report::SampleOutcome()>& observed, uint64_t& events) {
  return run_monte_carlo(program, o, run_is_random(program, base), observed,
                         bare_sample_runner(program, cost, network, base), events);
}

}  // namespace lacuna::run
