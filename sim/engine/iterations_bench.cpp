// Several iterations in one run (docs/engine.md#iterations): events per second
// must stay what one iteration gives. state.range(4) = iterations.
#include <benchmark/benchmark.h>

#include "sim/engine/pipeline_program.h"
#include "sim/engine/simulator.h"

namespace lacuna::engine {
namespace {

void BM_EventLoopIterations(benchmark::State& state) {
  testing::PipelineSpec spec;
  spec.tp = static_cast<int32_t>(state.range(0));
  spec.pp = static_cast<int32_t>(state.range(1));
  spec.dp = static_cast<int32_t>(state.range(2));
  spec.layers_per_stage = static_cast<int32_t>(state.range(3));
  spec.microbatches = 8;
  const ir::Program program = testing::make_pipeline_program(spec);
  testing::ClosedFormCost cost;
  Simulator sim(program, cost, {.iterations = static_cast<int32_t>(state.range(4))});
  uint64_t events = 0, ops = 0;
  for (auto _ : state) {
    const SimulationResult r = sim.run();
    events += r.events;
    ops += r.ops;
    benchmark::DoNotOptimize(r.end_time);
  }
  state.SetItemsProcessed(static_cast<int64_t>(events));
  state.counters["ops"] = benchmark::Counter(static_cast<double>(ops), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_EventLoopIterations)
    ->Args({8, 4, 2, 8, 1})
    ->Args({8, 4, 2, 8, 10})
    ->Args({8, 8, 8, 8, 1})
    ->Args({8, 8, 8, 8, 10})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace lacuna::engine
