#include "tools/cli/sampling_option.h"

#include <charconv>
#include <string>
#include <system_error>

#include "sim/core/error.h"
#include "sim/scenario/variability.h"
#include "tools/cli/variability_option.h"

namespace lacuna::cli {

void add_sampling_options(CLI::App* sub, SamplingOptions& o) {
  sub->add_option("--iterations", o.iterations,
                  "simulate N consecutive iterations in one run, no barrier between them; reports each iteration's "
                  "time and the steady-state mean of iterations 1..N-1 (docs/engine.md#iterations)")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  sub->add_option("--samples", o.samples,
                  "Monte Carlo: K independent runs, sample i with seed S + i; mean, p50, p90, p99 of iteration time "
                  "and MFU with 95 % confidence intervals (docs/metrics.md#monte-carlo)")
      ->check(CLI::Range(1, 1000000));
  sub->add_option("-j,--jobs", o.jobs, "--samples run at once (default: one per hardware thread)")
      ->check(CLI::Range(1, 4096));
}

bool run_is_random(const ir::Program& program, const engine::SimulationOptions& /*options*/) {
  return scenario::any_random_variability(program.variability());
}

SampleRunner bare_sample_runner(const ir::Program& program, const cost::CostModel& cost, NetworkMode network,
                                const engine::SimulationOptions& base) {
  return [&program, &cost, network, base](size_t /*index*/, uint64_t seed, uint64_t& events) {
    // The sample's own draws: the program's variability under the sample's
    // seed, as its perturbation and its links' variation.
    ir::Program sample = program;
    if (scenario::any_variability(sample.variability())) sample.mutable_variability()->set_seed(seed);
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

report::MonteCarlo run_monte_carlo(const ir::Program& program, const SamplingOptions& o, bool random,
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
                                   const engine::SimulationOptions& base, const SamplingOptions& o,
                                   const std::function<report::SampleOutcome()>& observed, uint64_t& events) {
  return run_monte_carlo(program, o, run_is_random(program, base), observed,
                         bare_sample_runner(program, cost, network, base), events);
}

}  // namespace lacuna::cli
