#include "sim/search/plan_check.h"

#include <random>
#include <string>

#include <gtest/gtest.h>

#include "sim/core/error.h"
#include "sim/search/plan_space.h"
#include "sim/search/search_test_support.h"

namespace lacuna::search {
namespace {

// Pruning never removes a plan Megatron-LM (lacuna's validation) accepts, and
// never lets through one it rejects: on random models, every sampled plan of
// the space gets the same verdict from check_plan and from validate_scenario.
TEST(PlanCheck, AgreesWithValidationOnRandomPlans) {
  std::mt19937_64 rng(2026);
  int accepted = 0, rejected = 0;
  for (int model = 0; model < 12; ++model) {
    const scenario::LoadedScenario base = testing::random_small(rng);
    const Dimensions dims = make_dimensions(base.spec, std::nullopt, {}, {Placement::kNone});
    const std::vector<Plan> plans = enumerate_plans(base.spec, dims, {});
    const PlanShape shape = plan_shape(base.spec);
    for (int k = 0; k < 120; ++k) {
      const Plan& plan = plans[rng() % plans.size()];
      const Fate fate = check_plan(shape, plan);
      bool valid = true;
      std::string why;
      try {
        scenario::validate_scenario(apply_plan(base.spec, plan), base.locations);
      } catch (const Error& e) {
        valid = false;
        why = e.what();
      }
      EXPECT_EQ(fate == Fate::kScreened, valid)
          << "model " << model << ": " << describe(plan) << " check_plan: " << fate_key(fate) << "; validation: "
          << (valid ? "accepted" : why);
      (valid ? accepted : rejected)++;
    }
  }
  // The sample covers both verdicts.
  EXPECT_GT(accepted, 100);
  EXPECT_GT(rejected, 100);
}

// The same agreement for MoE models: ep over the divisors of the experts and
// expert_tp over the node, pruned exactly when validate_moe (and every other
// rule) rejects the plan's scenario.
TEST(PlanCheck, AgreesWithValidationOnRandomMoePlans) {
  std::mt19937_64 rng(1919);
  int accepted = 0, rejected = 0, expert_fates = 0;
  for (int model = 0; model < 10; ++model) {
    const scenario::LoadedScenario base = testing::random_small_moe(rng);
    const Dimensions dims = make_dimensions(base.spec, std::nullopt, {}, {Placement::kNone});
    ASSERT_GT(dims.ep.size(), 1u);
    const std::vector<Plan> plans = enumerate_plans(base.spec, dims, {});
    const PlanShape shape = plan_shape(base.spec);
    for (int k = 0; k < 120; ++k) {
      const Plan& plan = plans[rng() % plans.size()];
      ASSERT_GT(plan.ep, 0);
      const Fate fate = check_plan(shape, plan);
      bool valid = true;
      std::string why;
      try {
        scenario::validate_scenario(apply_plan(base.spec, plan), base.locations);
      } catch (const Error& e) {
        valid = false;
        why = e.what();
      }
      EXPECT_EQ(fate == Fate::kScreened, valid)
          << "model " << model << ": " << describe(plan) << " check_plan: " << fate_key(fate) << "; validation: "
          << (valid ? "accepted" : why);
      (valid ? accepted : rejected)++;
      expert_fates += fate == Fate::kExpertParallel || fate == Fate::kExpertTp;
    }
  }
  EXPECT_GT(accepted, 100);
  EXPECT_GT(rejected, 100);
  EXPECT_GT(expert_fates, 0);
}

// ep and expert_tp: dimensions only of an MoE scenario; --fix narrows them;
// ep·expert_tp always divides tp·cp·dp in the enumerated plans; a dense
// scenario keeps its plans (ep 0, nothing in their description).
TEST(PlanSpace, ExpertParallelismIsADimensionOfMoeScenariosOnly) {
  std::mt19937_64 rng(7);
  const scenario::LoadedScenario dense = testing::gpt_small();
  const Dimensions dd = make_dimensions(dense.spec, std::nullopt, {}, {Placement::kNone});
  EXPECT_EQ(dd.ep, std::vector<int64_t>{0});
  for (const Plan& p : enumerate_plans(dense.spec, dd, {})) {
    ASSERT_EQ(p.ep, 0);
    ASSERT_EQ(describe(p).find(" ep"), std::string::npos);
  }
  EXPECT_THROW(make_dimensions(dense.spec, std::nullopt, {"parallel.ep=2"}, {Placement::kNone}), Error);

  scenario::LoadedScenario moe = dense;
  moe.spec.mutable_model()->mutable_llm()->mutable_moe()->set_num_experts(8);
  moe.spec.mutable_model()->mutable_llm()->mutable_moe()->set_top_k(2);
  const Dimensions dm = make_dimensions(moe.spec, std::nullopt, {}, {Placement::kNone});
  EXPECT_EQ(dm.ep, (std::vector<int64_t>{1, 2, 4, 8}));
  EXPECT_EQ(dm.expert_tp, (std::vector<int64_t>{1, 2, 4, 8}));
  for (const Plan& p : enumerate_plans(moe.spec, dm, {})) {
    ASSERT_EQ((int64_t{p.tp} * p.cp * p.dp) % (int64_t{p.ep} * p.expert_tp), 0) << describe(p);
  }
  const Dimensions fixed = make_dimensions(moe.spec, std::nullopt, {"parallel.ep=4", "parallel.expert_tp=1"}, {Placement::kNone});
  const std::vector<Plan> plans = enumerate_plans(moe.spec, fixed, {"parallel.ep=4", "parallel.expert_tp=1"});
  ASSERT_FALSE(plans.empty());
  for (const Plan& p : plans) {
    EXPECT_EQ(p.ep, 4);
    EXPECT_EQ(p.expert_tp, 1);
    EXPECT_NE(describe(p).find(" ep4 etp1"), std::string::npos);
    const scenario::Scenario s = apply_plan(moe.spec, p);
    EXPECT_EQ(s.parallel().ep(), 4);
    EXPECT_EQ(s.parallel().expert_tp(), 1);
  }
  (void)rng;
}

TEST(PlanCheck, EachRuleNamesItsReason) {
  const scenario::LoadedScenario base = testing::gpt_small();  // 16 heads, seq 2048, batch 32, 8 GPUs
  const PlanShape shape = plan_shape(base.spec);
  Plan p;
  p.num_nodes = 1;
  p.dp = 8;
  EXPECT_EQ(check_plan(shape, p), Fate::kScreened);
  Plan bad = p;
  bad.micro_batch = 3;  // 32 is not a multiple of 3 × 8
  EXPECT_EQ(check_plan(shape, bad), Fate::kBatch);
  bad = p;
  bad.tp = 8;
  bad.dp = 1;
  bad.micro_batch = 32;
  EXPECT_EQ(check_plan(shape, bad), Fate::kScreened);
  bad.tp = 32;  // more than the 16 heads
  EXPECT_EQ(check_plan(shape, bad), Fate::kTpHeads);
  bad = p;
  bad.pp = 2;
  bad.dp = 4;
  bad.virtual_stages = 2;
  bad.schedule = scenario::INTERLEAVED_1F1B;
  bad.p2p_overlapped = false;
  EXPECT_EQ(check_plan(shape, bad), Fate::kInterleavedBlockingP2p);
  bad.p2p_overlapped = true;
  bad.micro_batch = 8;  // 32 / (8 × 4) = 1 microbatch, not a multiple of pp 2
  EXPECT_EQ(check_plan(shape, bad), Fate::kInterleavedMicrobatches);
}

}  // namespace
}  // namespace lacuna::search
