// Optimus planner speed on the paper's largest strong-scaling point:
// ViT-22B + GPT-175B on 3,072 GPUs (TP 8, PP 8 × 12 chunks, DP 48,
// 16 microbatches). Plan = LLM compile + one LLM simulation + every encoder
// plan and split through the bubble scheduler; compile adds the emission.
#include <benchmark/benchmark.h>

#include <string>

#include "sim/cost/cost_model.h"
#include "sim/placement/optimus_planner.h"
#include "sim/scenario/scenario.h"

namespace lacuna::placement::optimus {
namespace {

const scenario::LoadedScenario& scenario_3072() {
  static const scenario::LoadedScenario s =
      scenario::load_scenario(std::string(LACUNA_SOURCE_DIR) + "/scenarios/mllm/optimus-vit22b-gpt175b-3072.pbtxt");
  return s;
}

void BM_OptimusPlan3072(benchmark::State& state) {
  const auto& s = scenario_3072();
  const auto cost = cost::make_analytic_cost_model(s.spec.cluster(), s.spec.training().precision());
  int64_t splits = 0;
  for (auto _ : state) {
    const PlannerResult r = plan_optimus(s, *cost, {});
    splits = r.splits_evaluated;
    benchmark::DoNotOptimize(r.schedule.estimate_ns);
  }
  state.counters["splits"] = static_cast<double>(splits);
}
BENCHMARK(BM_OptimusPlan3072)->Unit(benchmark::kMillisecond);

void BM_OptimusCompile3072(benchmark::State& state) {
  const auto& s = scenario_3072();
  const auto cost = cost::make_analytic_cost_model(s.spec.cluster(), s.spec.training().precision());
  for (auto _ : state) {
    const ir::Program p = emit_optimus(s, plan_optimus(s, *cost, {}));
    benchmark::DoNotOptimize(p.classes_size());
  }
}
BENCHMARK(BM_OptimusCompile3072)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace lacuna::placement::optimus
