// `--samples K` on a pool of threads (docs/performance.md): K = 8 samples of
// the 512-rank synthetic job (TP8 PP8 DP8, 3 iterations each), each sample a
// program whose ranks are slowed by up to 20 % from its seed, run with
// state.range(0) threads. Wall time (UseRealTime); the speed-up with threads
// is the ratio of the /1 and /N rows.
#include <benchmark/benchmark.h>

#include "sim/engine/pipeline_program.h"
#include "sim/engine/simulator.h"
#include "sim/report/analyses/monte_carlo.h"

namespace lacuna::report {
namespace {

void BM_MonteCarloSamples(benchmark::State& state) {
  engine::testing::PipelineSpec spec;
  spec.tp = 8;
  spec.pp = 8;
  spec.dp = 8;
  spec.layers_per_stage = 8;
  spec.microbatches = 8;
  spec.dp_bytes = 4096;
  const ir::Program base = engine::testing::make_pipeline_program(spec);
  engine::testing::ClosedFormCost cost;
  const int jobs = static_cast<int>(state.range(0));
  constexpr int32_t kSamples = 8;
  uint64_t events = 0;
  for (auto _ : state) {
    std::vector<uint64_t> sample_events(kSamples, 0);
    const std::vector<SampleOutcome> out = run_samples(kSamples, 1, jobs, [&](size_t i, uint64_t seed) {
      ir::Program p = base;
      for (int r = 0; r < p.ranks_size(); ++r) {
        p.mutable_ranks(r)->set_compute_time_scale(1.0 + 0.2 * static_cast<double>((seed * 131 + r * 7) % 100) / 100);
      }
      engine::Simulator sim(p, cost, {.iterations = 3, .seed = seed});
      const engine::SimulationResult r = sim.run();
      sample_events[i] = r.events;
      return SampleOutcome{seed, r.iteration_ends};
    });
    for (uint64_t e : sample_events) events += e;
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(events));
}
BENCHMARK(BM_MonteCarloSamples)->Arg(1)->Arg(2)->Arg(4)->Arg(8)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace lacuna::report
