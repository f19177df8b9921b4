// The screen's memory lower bound is never above the compiled program's peak
// (so pruning by it never removes a plan that fits), and its estimate stays
// near the peak.
#include <algorithm>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "sim/cost/memory_peak.h"
#include "sim/placement/compile.h"
#include "sim/search/plan_check.h"
#include "sim/search/plan_space.h"
#include "sim/search/screen.h"
#include "sim/search/search_test_support.h"

namespace lacuna::search {
namespace {

TEST(PlanMemory, LowerBoundNeverExceedsTheCompiledPeak) {
  std::mt19937_64 rng(17);
  int compared = 0;
  double worst_estimate_error = 0;
  std::string worst;
  for (int model = 0; model < 10; ++model) {
    const scenario::LoadedScenario base = testing::random_small(rng);
    const Dimensions dims = make_dimensions(base.spec, std::nullopt, {}, {Placement::kNone});
    const std::vector<Plan> plans = enumerate_plans(base.spec, dims, {});
    const PlanShape shape = plan_shape(base.spec);
    Screen screen(base.spec);
    for (int k = 0, tries = 0; k < 12 && tries < 2000; ++tries) {
      const Plan& plan = plans[rng() % plans.size()];
      if (check_plan(shape, plan) != Fate::kScreened) continue;
      ++k;
      scenario::LoadedScenario loaded = base;
      loaded.spec = apply_plan(base.spec, plan);
      const ir::Program program = placement::compile(loaded);
      int64_t peak = 0;
      for (int32_t c = 0; c < program.classes_size(); ++c) peak = std::max(peak, cost::class_memory(program, c).peak.count());
      const ScreenEstimate e = screen.estimate(plan);
      EXPECT_LE(e.memory_lower_bound.count(), peak) << describe(plan) << [&] {
        std::string d;
        for (int32_t c = 0; c < program.classes_size(); ++c) {
          const auto m = cost::class_memory(program, c);
          const auto& b = program.classes(c).memory();
          d += " class " + std::to_string(c) + ": baseline " + std::to_string(m.baseline.count()) + " (w " +
               std::to_string(b.weights_bytes()) + " g " + std::to_string(b.gradients_bytes()) + " o " +
               std::to_string(b.optimizer_bytes()) + " other " + std::to_string(b.other_bytes()) + ") act " +
               std::to_string(m.activation_peak.count());
        }
        return d;
      }();
      const double error = std::abs(double(e.memory.count()) / double(peak) - 1);
      if (error > worst_estimate_error) {
        worst_estimate_error = error;
        worst = describe(plan) + ": estimate " + std::to_string(e.memory.count()) + ", compiled " + std::to_string(peak);
        for (int32_t c = 0; c < program.classes_size(); ++c) {
          const auto m = cost::class_memory(program, c);
          worst += "; class " + std::to_string(c) + " baseline " + std::to_string(m.baseline.count()) + " act " +
                   std::to_string(m.activation_peak.count());
        }
      }
      ++compared;
    }
  }
  EXPECT_GT(compared, 80);
  // The estimate (the over-memory-estimate fate, the screened points of the
  // Pareto picture) within 10 % of the compiled peak; measured at 3.3 % on
  // these 120 plans when this test was written.
  EXPECT_LT(worst_estimate_error, 0.10) << worst;
}

}  // namespace
}  // namespace lacuna::search
