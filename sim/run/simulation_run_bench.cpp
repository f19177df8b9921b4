// `lacuna simulate` as the command runs it (compile, cost model, the run with
// its bubble and communication accounting), without output files: the
// full-rank targets of docs/performance.md#speed-at-scale-issue-17. One
// iteration per case (they take seconds to minutes); compare medians of
// --benchmark_repetitions=3, today's binary beside the new one.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <string>
#include <vector>

#include "sim/run/simulation_input.h"
#include "sim/run/simulation_run.h"

namespace lacuna::run {
namespace {

void BM_Simulate(benchmark::State& state, const std::string& scenario, NetworkMode network,
                 const std::vector<std::string>& set, bool ideal = false) {
  scenario::ScenarioEdits edits;
  edits.set = set;
  edits.ideal = ideal;
  const SimulationInput input = load_simulation_input(std::string(LACUNA_SOURCE_DIR) + "/" + scenario, {}, 1, edits);
  uint64_t events = 0;
  network::FluidNetwork::Counters solver;
  for (auto _ : state) {
    SimulationRun run(input.program, *input.cost, {.network = network});
    const report::Summary summary = run.run();
    events += run.events();
    if (run.flow_network() != nullptr) solver = run.flow_network()->solver_counters();
    benchmark::DoNotOptimize(summary.iteration_time);
  }
  state.SetItemsProcessed(static_cast<int64_t>(events));
  if (network == NetworkMode::kFlow) {
    // What the flow solver did in the last iteration: settles (timestamps
    // with changes), component solves and their size.
    state.counters["settles"] = static_cast<double>(solver.settles);
    state.counters["solves"] = static_cast<double>(solver.solves);
    state.counters["still_solves"] = static_cast<double>(solver.still_solves);
    state.counters["fitted"] = static_cast<double>(solver.fitted);
    state.counters["quiet_removes"] = static_cast<double>(solver.quiet_removes);
    state.counters["detaching_solves"] = static_cast<double>(solver.detaching_solves);
    state.counters["links_per_solve"] =
        static_cast<double>(solver.solved_links) / static_cast<double>(std::max<uint64_t>(1, solver.solves));
  }
  state.counters["gpus"] = static_cast<double>(input.program.ranks_size());
}

const char* const kGpt3 = "scenarios/llm/gpt3-175b-3072.pbtxt";
const char* const kMegaScale = "scenarios/llm/megascale-175b-12288.pbtxt";
// GPT-3 175B at 131,072 GPUs: the 3,072-GPU scenario with 16,384 nodes and
// dp 2,048 (global batch scaled with dp: 32 sequences per replica).
const std::vector<std::string> k131072 = {"cluster.num_nodes=16384", "parallel.dp=2048", "training.global_batch=65536"};

// Target: ≤ 1.5 s.
BENCHMARK_CAPTURE(BM_Simulate, gpt3_175b_3072_flow, kGpt3, NetworkMode::kFlow, {})
    ->Unit(benchmark::kSecond)
    ->Iterations(1);
// The same on the ideal cluster (--ideal): ranks in lockstep.
BENCHMARK_CAPTURE(BM_Simulate, gpt3_175b_3072_flow_ideal, kGpt3, NetworkMode::kFlow, {}, true)
    ->Unit(benchmark::kSecond)
    ->Iterations(1);
BENCHMARK_CAPTURE(BM_Simulate, gpt3_175b_3072_analytic, kGpt3, NetworkMode::kAnalytic, {})
    ->Unit(benchmark::kSecond)
    ->Iterations(1);
// Target: ≤ 8 s and ≤ 1 GB.
BENCHMARK_CAPTURE(BM_Simulate, megascale_175b_12288_flow, kMegaScale, NetworkMode::kFlow, {})
    ->Unit(benchmark::kSecond)
    ->Iterations(1);
// Target: ≤ 120 s and ≤ 8 GB.
BENCHMARK_CAPTURE(BM_Simulate, gpt3_175b_131072_flow, kGpt3, NetworkMode::kFlow, k131072)
    ->Unit(benchmark::kSecond)
    ->Iterations(1);

}  // namespace
}  // namespace lacuna::run
