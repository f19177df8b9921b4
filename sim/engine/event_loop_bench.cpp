// Engine throughput. items_per_second is queue events per second (each event
// completes a compute op, a collective or a transfer; records and waits run
// inline and are counted in the "ops" counter).
#include <benchmark/benchmark.h>


#include "sim/engine/event_queue.h"
#include "sim/engine/pipeline_program.h"
#include "sim/engine/simulator.h"

namespace lacuna::engine {
namespace {

struct Payload {
  uint32_t a;
  uint32_t b;
};

// Steady state of a discrete-event loop: pop one, schedule one a little later.
template <class Queue>
void BM_QueuePopPush(benchmark::State& state) {
  const size_t pending = static_cast<size_t>(state.range(0));
  Queue q(pending);
  // xorshift: the generator must cost little next to the queue.
  uint64_t x = 88172645463325252ULL;
  auto next = [&x] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return static_cast<int64_t>(x & 0xffff);
  };
  for (size_t i = 0; i < pending; ++i) q.schedule(TimeNs(next()), Payload{0, 0});
  ScheduledEvent<Payload> e;
  for (auto _ : state) {
    q.pop(e);
    q.schedule(e.time + TimeNs(1 + next()), e.payload);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_QueuePopPush<HeapEventQueue<Payload>>)->Arg(64)->Arg(4096)->Arg(32768);
BENCHMARK(BM_QueuePopPush<RadixEventQueue<Payload>>)->Arg(64)->Arg(4096)->Arg(32768);

// Synthetic Megatron-shaped job: state.range(0) = tp, (1) = pp, (2) = dp,
// (3) = layers per stage; 8 microbatches.
void BM_EventLoop(benchmark::State& state) {
  testing::PipelineSpec spec;
  spec.tp = static_cast<int32_t>(state.range(0));
  spec.pp = static_cast<int32_t>(state.range(1));
  spec.dp = static_cast<int32_t>(state.range(2));
  spec.layers_per_stage = static_cast<int32_t>(state.range(3));
  spec.microbatches = 8;
  const ir::Program program = testing::make_pipeline_program(spec);
  testing::ClosedFormCost cost;
  Simulator sim(program, cost);
  uint64_t events = 0, ops = 0;
  for (auto _ : state) {
    const SimulationResult r = sim.run();
    events += r.events;
    ops += r.ops;
    benchmark::DoNotOptimize(r.end_time);
  }
  state.SetItemsProcessed(static_cast<int64_t>(events));
  state.counters["ops"] = benchmark::Counter(static_cast<double>(ops), benchmark::Counter::kIsRate);
  state.counters["ranks"] = static_cast<double>(program.ranks_size());
}
BENCHMARK(BM_EventLoop)->Args({8, 4, 2, 8})->Args({8, 8, 8, 8})->Unit(benchmark::kMillisecond);

// The same 64-rank job with host costs on every op (docs/engine.md#host):
// up to 3 µs per issue, host_sync on one op in 5, so the host is often late
// and its wake-ups are events too.
void BM_EventLoopWithHost(benchmark::State& state) {
  testing::PipelineSpec spec;
  spec.tp = 8;
  spec.pp = 4;
  spec.dp = 2;
  spec.layers_per_stage = 8;
  spec.microbatches = 8;
  ir::Program program = testing::make_pipeline_program(spec);
  testing::add_random_host_costs(program, 1, 3000, 5);
  testing::ClosedFormCost cost;
  Simulator sim(program, cost);
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
BENCHMARK(BM_EventLoopWithHost)->Unit(benchmark::kMillisecond);

// The milestone's scale: 3,072 ranks (TP8 × PP8 × DP48), 16 microbatches,
// layers_per_stage chosen so the iteration has about 35M ops.
void BM_Gpt3Scale(benchmark::State& state) {
  testing::PipelineSpec spec;
  spec.tp = 8;
  spec.pp = 8;
  spec.dp = 48;
  spec.microbatches = 16;
  spec.layers_per_stage = static_cast<int32_t>(state.range(0));
  const ir::Program program = testing::make_pipeline_program(spec);
  testing::ClosedFormCost cost;
  uint64_t events = 0, ops = 0;
  for (auto _ : state) {
    Simulator sim(program, cost, SimulationOptions{state.range(1) != 0});
    const SimulationResult r = sim.run();
    events += r.events;
    ops += r.ops;
    benchmark::DoNotOptimize(r.end_time);
  }
  state.SetItemsProcessed(static_cast<int64_t>(events));
  state.counters["ops"] = benchmark::Counter(static_cast<double>(ops), benchmark::Counter::kIsRate);
  state.counters["ops_per_iteration"] = static_cast<double>(ops) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_Gpt3Scale)->Args({60, 0})->Args({60, 1})->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace
}  // namespace lacuna::engine
