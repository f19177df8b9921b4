#include "sim/report/analyses/summary.h"

#include <gtest/gtest.h>

#include "sim/report/formats/json_report.h"
#include "sim/report/formats/terminal_report.h"
#include "sim/report/observers/test_fixture.h"
#include "sim/core/option_text.h"

#include <nlohmann/json.hpp>

namespace lacuna::report {
namespace {

Summary run_fixture(bool fold = false) {
  static const ir::Program p = testing::two_rank_program();
  BubbleAccounting acc;
  testing::replay(p, {&acc}, fold);
  return summarize(p, acc, "test cost model", fold);
}

TEST(WeightedStats, LowerMedianAndWorstRank) {
  Stats s = weighted_stats({{5, 3, 1}, {1, 0, 1}, {9, 7, 1}, {9, 2, 1}});
  EXPECT_EQ(s.min, 1);
  EXPECT_EQ(s.max, 9);
  EXPECT_EQ(s.median, 5);  // lower median of 1 5 9 9
  EXPECT_EQ(s.worst_rank, 2);  // lowest rank among the max
}

TEST(WeightedStats, WeightsCountRepresentedRanks) {
  // Rank 0 stands for 10 ranks: the median is its value.
  Stats s = weighted_stats({{100, 0, 10}, {1, 5, 1}, {1000, 6, 1}});
  EXPECT_EQ(s.median, 100);
  EXPECT_EQ(weighted_stats({}).worst_rank, -1);
}

TEST(Summary, HeadlineMetricsFollowTheFormulas) {
  const Summary s = run_fixture();
  EXPECT_EQ(s.iteration_time, TimeNs(400));
  EXPECT_EQ(s.num_gpus, 2);
  // tokens / T = 4000 / 400 ns
  EXPECT_DOUBLE_EQ(s.tokens_per_s, 4000 / 400e-9);
  // 8e6 FLOP / (400 ns · 2 GPUs) = 1e13 FLOP/s per GPU = 10 TFLOP/s; peak 1e10 → MFU 1000
  EXPECT_DOUBLE_EQ(s.tflops_per_gpu, 10.0);
  EXPECT_DOUBLE_EQ(s.mfu, 1000.0);
  EXPECT_DOUBLE_EQ(s.hfu, 1250.0);
  EXPECT_EQ(s.bubbles[static_cast<int>(Bubble::kPpCooldown)].max, 200);
  EXPECT_EQ(s.bubbles[static_cast<int>(Bubble::kPpCooldown)].worst_rank, 0);
  EXPECT_EQ(s.bubbles[static_cast<int>(Bubble::kPpWarmup)].worst_rank, 1);
  EXPECT_EQ(s.idle.max, 250);
  EXPECT_EQ(s.peak_memory.max, 2100);
  EXPECT_EQ(s.over_capacity_ranks, 2);
  EXPECT_EQ(s.busy_by_phase[ir::FORWARD].max, 100);  // rank 0's F [0,100]
  EXPECT_EQ(s.busy_by_phase[ir::FORWARD].worst_rank, 0);
  EXPECT_EQ(s.busy_by_phase[ir::RECOMPUTE].max, 0);
}

TEST(Summary, FoldedRepresentativeCountsForItsRanks) {
  const Summary s = run_fixture(true);
  EXPECT_TRUE(s.folded);
  EXPECT_EQ(s.simulated_ranks, 1);
  EXPECT_EQ(s.over_capacity_ranks, 2);
}

TEST(JsonReport, HasTheDocumentedKeysAndPerRankEntries) {
  const Summary s = run_fixture();
  const std::string text = summary_json(s);
  const auto j = nlohmann::json::parse(text);
  for (const char* key : {"iteration_time_s", "tokens_per_s", "tflops_per_gpu", "mfu", "hfu", "num_gpus", "mode",
                          "ranks", "bubble_summary", "peak_memory", "plan", "cost_model"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["mode"], "full");
  EXPECT_EQ(j["num_gpus"], 2);
  EXPECT_DOUBLE_EQ(j["iteration_time_s"].get<double>(), 400e-9);
  ASSERT_EQ(j["ranks"].size(), 2u);
  const auto& r1 = j["ranks"][1];
  EXPECT_EQ(r1["rank"], 1);
  EXPECT_DOUBLE_EQ(r1["bubble_s"]["pp_warmup"].get<double>(), 60e-9);
  EXPECT_DOUBLE_EQ(r1["bubble_s"]["total"].get<double>(), 250e-9);
  EXPECT_EQ(r1["peak_memory_bytes"], 2100);
  EXPECT_EQ(r1["over_capacity"], true);
  for (const char* k : {"pp_warmup", "pp_cooldown", "pp_other", "tp_exposed", "cp_exposed", "dp_exposed", "pp_exposed",
                        "host_overhead", "total"}) {
    EXPECT_TRUE(r1["bubble_s"].contains(k)) << k;
  }
  EXPECT_EQ(r1["bubble_s"]["host_overhead"].get<double>(), 0.0) << "the scripted run's host is never late";
  // One line per rank: compact at 3,072 ranks.
  EXPECT_NE(text.find("\n  {\"rank\":0,"), std::string::npos);
}

TEST(JsonReport, FoldModeListsRepresentedRanks) {
  const auto j = nlohmann::json::parse(summary_json(run_fixture(true)));
  EXPECT_EQ(j["mode"], "folded");
  EXPECT_EQ(j["ranks"][0]["ranks"], nlohmann::json::array({0, 1}));
}

TEST(JsonReport, IsByteIdenticalAcrossRuns) { EXPECT_EQ(summary_json(run_fixture()), summary_json(run_fixture())); }

TEST(TerminalReport, ShowsTheHeadlineRows) {
  RunStats run;
  run.wall_seconds = 0.5;
  run.events = 1000;
  const std::string t = format_summary(run_fixture(), run);
  for (const char* needle : {"tiny <two> & ranks", "iteration time", "400 ns", "MFU", "HFU", "pp_warmup", "dp_exposed",
                             "bubble host_overhead", "peak memory per rank", "2 of 2 ranks over capacity", "test cost model", "full: all 2",
                             "2.000 k events/s", "1F1B", "  backward_input"}) {
    EXPECT_NE(t.find(needle), std::string::npos) << needle << "\n" << t;
  }
  EXPECT_EQ(t.find("\n      recompute"), std::string::npos) << "phases without work are left out\n" << t;
}

TEST(TerminalReport, FoldTipOnlyForLongRunsThatFoldToFewerRanks) {
  const std::string tip = fold_tip(9.1, 3072, 8, false);
  EXPECT_EQ(neutral_options(tip),
            "`fold` simulates 8 of 3072 ranks; with no variability identical ranks stay identical: the same result");
  EXPECT_NE(fold_tip(9.1, 3072, 8, true).find("flow network sees only the simulated ranks' traffic"), std::string::npos);
  EXPECT_EQ(spell_options(fold_tip(9.1, 3072, 8, false, 57'076, 16'330'499), cli_option),
            "--fold simulates 8 of 3072 ranks (about 57.076 k events, against this run's 16.330 M events); with no "
            "variability identical ranks stay identical: the same result");
  EXPECT_EQ(fold_tip(1.9, 3072, 8, false), "");  // short runs: no tip
  EXPECT_EQ(fold_tip(9.1, 64, 64, false), "");   // folding would simulate every rank
  EXPECT_EQ(fold_tip(9.1, 0, 0, false), "");
  RunStats run;
  run.wall_seconds = 9.1;
  run.tip = tip;
  const std::string t = format_summary(run_fixture(), run);
  EXPECT_NE(t.find("\n  tip "), std::string::npos) << t;
  RunStats none;
  EXPECT_EQ(format_summary(run_fixture(), none).find("  tip "), std::string::npos);
}

}  // namespace
}  // namespace lacuna::report
