// The screen's memory lower bound is never above the compiled program's peak
// (so pruning by it never removes a plan that fits), and its estimate stays
// near the peak.
#include <algorithm>
#include <cstdio>
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

bool has_expert_kernels(const ir::Program& p) {
  for (const ir::RankClass& c : p.classes())
    for (const ir::Stream& st : c.streams())
      for (const ir::Op& op : st.ops())
        if (op.has_compute() && op.compute().role() == ir::ROLE_EXPERT_FC1) return true;
  return false;
}

// Compiles `per_model` random valid plans of each of `models` random
// scenarios; checks the bound and returns the worst estimate error.
template <class MakeScenario>
double check_memory_bounds(std::mt19937_64& rng, int models, int per_model, MakeScenario make, int& compared,
                           std::string& worst, int* skipped_out = nullptr) {
  int skipped = 0;
  double worst_estimate_error = 0;
  for (int model = 0; model < models; ++model) {
    const scenario::LoadedScenario base = make(rng);
    const Dimensions dims = make_dimensions(base.spec, std::nullopt, {}, {Placement::kNone});
    const std::vector<Plan> plans = enumerate_plans(base.spec, dims, {});
    const PlanShape shape = plan_shape(base.spec);
    Screen screen(base.spec);
    for (int k = 0, tries = 0; k < per_model && tries < 2000; ++tries) {
      const Plan& plan = plans[rng() % plans.size()];
      if (check_plan(shape, plan) != Fate::kScreened) continue;
      ++k;
      scenario::LoadedScenario loaded = base;
      loaded.spec = apply_plan(base.spec, plan);
      const ir::Program program = placement::compile(loaded);
      // An MoE scenario whose compiled program carries no MoE (the compiler
      // without its MoE layers) has nothing to compare the MoE bound with.
      if (base.spec.model().llm().moe().num_experts() > 0 && !has_expert_kernels(program)) {
        ++skipped;
        continue;
      }
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
  if (skipped_out != nullptr) *skipped_out = skipped;
  return worst_estimate_error;
}

TEST(PlanMemory, LowerBoundNeverExceedsTheCompiledPeak) {
  std::mt19937_64 rng(17);
  int compared = 0;
  std::string worst;
  const double worst_estimate_error = check_memory_bounds(rng, 10, 12, testing::random_small, compared, worst);
  EXPECT_GT(compared, 80);
  // The estimate (the over-memory-estimate fate, the screened points of the
  // Pareto picture) within 10 % of the compiled peak; measured at 3.3 % on
  // these 120 plans when this test was written.
  EXPECT_LT(worst_estimate_error, 0.10) << worst;
}

// MoE plans (ep, expert_tp, expert state sharded over expert DP): the bound
// stays below the compiled peak, so pruning by it keeps every MoE plan that
// fits, and the estimate within 10 % of it, as for dense plans.
TEST(PlanMemory, LowerBoundNeverExceedsTheCompiledPeakWithMoe) {
  std::mt19937_64 rng(23);
  int compared = 0;
  std::string worst;
  int skipped = 0;
  const double worst_estimate_error =
      check_memory_bounds(rng, 8, 8, testing::random_small_moe, compared, worst, &skipped);
  if (compared == 0 && skipped > 0) GTEST_SKIP() << "the compiler emits no MoE programs yet";
  EXPECT_GT(compared, 40);
  // Measured at 3.3 % on these 64 plans when this test was written.
  EXPECT_LT(worst_estimate_error, 0.10) << worst;
  std::printf("MoE memory estimate over %d plans: worst error %.1f %% (%s)\n", compared, 100 * worst_estimate_error,
              worst.c_str());
}

// FP8 plans: the FP8 weight copies and, under delayed scaling, the amax
// group's communicator count in both bound and estimate, as the compiler
// counts them.
TEST(PlanMemory, LowerBoundNeverExceedsTheCompiledPeakWithFp8) {
  std::mt19937_64 rng(29);
  int compared = 0;
  std::string worst;
  const double worst_estimate_error = check_memory_bounds(rng, 8, 8, testing::random_small_fp8, compared, worst);
  EXPECT_GT(compared, 40);
  EXPECT_LT(worst_estimate_error, 0.10) << worst;
  std::printf("FP8 memory estimate over %d plans: worst error %.1f %% (%s)\n", compared, 100 * worst_estimate_error,
              worst.c_str());
}

}  // namespace
}  // namespace lacuna::search
