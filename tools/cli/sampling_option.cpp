#include "tools/cli/sampling_option.h"

#include <charconv>
#include <string>
#include <system_error>

#include "sim/core/error.h"

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
  // Shared with the variability model, which keys its draws on it.
  sub->add_option("--seed", o.seed, "the run's random seed (sample i of --samples uses S + i)")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            // CLI11 would take "-1" as 2^64 - 1 and saturate values past it.
            uint64_t value = 0;
            const char* end = text.data() + text.size();
            const auto [ptr, ec] = std::from_chars(text.data(), end, value);
            if (text.empty() || ec != std::errc() || ptr != end) {
              return "expected an integer from 0 to 18446744073709551615 (2^64 - 1), got '" + text + "'";
            }
            return {};
          },
          "UINT64"))
      ->capture_default_str();
  sub->add_option("-j,--jobs", o.jobs, "--samples run at once (default: one per hardware thread)")
      ->check(CLI::Range(1, 4096));
}

bool run_is_random(const ir::Program& /*program*/, const engine::SimulationOptions& /*options*/) { return false; }

SampleRunner bare_sample_runner(const ir::Program& program, const cost::CostModel& cost, NetworkMode network,
                                const engine::SimulationOptions& base) {
  return [&program, &cost, network, base](size_t /*index*/, uint64_t seed, uint64_t& events) {
    NetworkSetup setup(program, network);
    engine::SimulationOptions options = base;
    options.seed = seed;
    engine::Simulator sim(program, cost, setup.apply(options));
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
