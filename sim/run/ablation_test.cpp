// `lacuna ablate` as a library (sim/run/ablation.h): the reference row, one
// row per switch, the switches that cannot apply or that validation rejects,
// what each flip changes, and rows identical for any thread count.
#include "sim/run/ablation.h"

#include <gtest/gtest.h>

#include <string>

#include "sim/scenario/scenario.h"

namespace lacuna::run {
namespace {

scenario::LoadedScenario gpt() {
  return scenario::load_scenario(std::string(LACUNA_SOURCE_DIR) + "/scenarios/llm/gpt-1.3b-8gpu.pbtxt");
}

const AblationOutcome& row(const std::vector<AblationOutcome>& rows, const std::string& prefix) {
  for (const AblationOutcome& r : rows)
    if (r.name.rfind(prefix, 0) == 0) return r;
  ADD_FAILURE() << "no row " << prefix;
  return rows.front();
}

TEST(Ablation, OneRowPerSwitchEachChangingWhatItNames) {
  const auto rows = run_ablation(gpt(), NetworkMode::kAnalytic, /*fold=*/true, /*jobs=*/2);
  ASSERT_GT(rows.size(), 10u);
  EXPECT_EQ(rows[0].name, "as written");
  EXPECT_GT(rows[0].seconds, 0);
  EXPECT_GT(rows[0].mfu, 0);
  for (const AblationOutcome& r : rows) {
    SCOPED_TRACE(r.name);
    if (!r.applies || !r.problem.empty()) continue;
    EXPECT_GT(r.seconds, 0);
    EXPECT_LE(r.mfu, 1.0);
  }
  // Removing every host overhead can only make the iteration shorter.
  const AblationOutcome& host = row(rows, "host overheads");
  ASSERT_TRUE(host.applies);
  EXPECT_LT(host.seconds, rows[0].seconds);
  // The scenario overlaps neither gradient reduction nor parameter gather:
  // turning the overlap on shortens the iteration and the exposed DP time.
  const AblationOutcome& dp = row(rows, "DP overlap on");
  ASSERT_TRUE(dp.applies) << dp.problem;
  EXPECT_LT(dp.seconds, rows[0].seconds);
  // The flip of pipeline p2p changes the schedule's communication only.
  EXPECT_TRUE(row(rows, "pipeline p2p").applies);
}

TEST(Ablation, RowsAreTheSameForAnyThreadCount) {
  const auto one = run_ablation(gpt(), NetworkMode::kAnalytic, true, 1);
  const auto two = run_ablation(gpt(), NetworkMode::kAnalytic, true, 2);
  ASSERT_EQ(one.size(), two.size());
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_EQ(one[i].name, two[i].name);
    EXPECT_EQ(one[i].problem, two[i].problem);
    EXPECT_EQ(one[i].seconds, two[i].seconds) << one[i].name;
    EXPECT_EQ(one[i].bubbles_ns, two[i].bubbles_ns) << one[i].name;
  }
}

TEST(Ablation, PipelineP2pDoesNotApplyWithoutAPipeline) {
  scenario::LoadedScenario s = gpt();
  s.spec.mutable_parallel()->set_pp(1);
  s.spec.mutable_parallel()->set_dp(4);
  const auto rows = run_ablation(s, NetworkMode::kAnalytic, true, 2);
  EXPECT_FALSE(row(rows, "pipeline p2p").applies);
  EXPECT_EQ(moved_bubbles(rows[0], rows[0]), "—");
}

}  // namespace
}  // namespace lacuna::run
