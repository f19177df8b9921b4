// The screen of `lacuna search` on one core (docs/performance.md#search-and-sweep;
// target ≥ 10,000 candidates/s per core): GPT-3 175B on 3,072 H100.
// BM_ScreenValidPlans: Screen::estimate over every plan that passes
// check_plan, with a fresh Screen per iteration, so the per-shape cache
// starts cold as it does in a search. BM_CheckAndScreenAllPlans: what one
// search thread does per plan, the validity rules first.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "sim/search/plan_check.h"
#include "sim/search/plan_space.h"
#include "sim/search/screen.h"

namespace lacuna::search {
namespace {

struct Space {
  scenario::LoadedScenario base;
  std::vector<Plan> plans;
  std::vector<Plan> valid;
};

const Space& gpt3_space() {
  static const Space space = [] {
    Space s{scenario::load_scenario(std::string(LACUNA_SOURCE_DIR) + "/scenarios/llm/gpt3-175b-3072.pbtxt"), {}, {}};
    s.plans = enumerate_plans(s.base.spec, make_dimensions(s.base.spec, std::nullopt, {}, {Placement::kNone}), {});
    const PlanShape shape = plan_shape(s.base.spec);
    for (const Plan& p : s.plans)
      if (check_plan(shape, p) == Fate::kScreened) s.valid.push_back(p);
    return s;
  }();
  return space;
}

void BM_ScreenValidPlans(benchmark::State& state) {
  const Space& s = gpt3_space();
  for (auto _ : state) {
    Screen screen(s.base.spec);
    double sum = 0;
    for (const Plan& p : s.valid) sum += screen.estimate(p).iteration_s;
    benchmark::DoNotOptimize(sum);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(s.valid.size()));
  state.counters["plans"] = static_cast<double>(s.valid.size());
}
BENCHMARK(BM_ScreenValidPlans)->Unit(benchmark::kMillisecond);

void BM_CheckAndScreenAllPlans(benchmark::State& state) {
  const Space& s = gpt3_space();
  const PlanShape shape = plan_shape(s.base.spec);
  for (auto _ : state) {
    Screen screen(s.base.spec);
    double sum = 0;
    for (const Plan& p : s.plans)
      if (check_plan(shape, p) == Fate::kScreened) sum += screen.estimate(p).iteration_s;
    benchmark::DoNotOptimize(sum);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(s.plans.size()));
  state.counters["plans"] = static_cast<double>(s.plans.size());
}
BENCHMARK(BM_CheckAndScreenAllPlans)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace lacuna::search
