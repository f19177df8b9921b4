#include "tools/cli/sampling_option.h"


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

}  // namespace lacuna::cli
