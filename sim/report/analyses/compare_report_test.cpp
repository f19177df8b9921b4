// `lacuna compare`'s metrics, table and JSON on hand-made summaries whose
// numbers are known: speedup, the hidden fraction (and its clamping), mean
// bubbles with fold weights, failed placements, determinism.
#include "sim/report/analyses/compare_report.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace lacuna::report {
namespace {

constexpr int64_t kMs = 1'000'000;

RankAccount rank(int32_t r, std::vector<int32_t> represents, int64_t busy, int64_t warmup, int64_t other,
                 int64_t boundary) {
  RankAccount a;
  a.rank = r;
  a.represents = std::move(represents);
  a.busy = TimeNs(busy);
  a.bubbles[static_cast<size_t>(Bubble::kPpWarmup)] = TimeNs(warmup);
  a.bubbles[static_cast<size_t>(Bubble::kPpOther)] = TimeNs(other);
  a.bubbles[static_cast<size_t>(Bubble::kBoundaryExposed)] = TimeNs(boundary);
  return a;
}

// A simulated placement: T, GPUs, encoder compute of the busiest GPU.
Summary summary(int64_t t_ns, int32_t gpus, int64_t encoder_max_ns) {
  Summary s;
  s.scenario_name = "mm";
  s.num_gpus = gpus;
  s.iteration_time = TimeNs(t_ns);
  s.tokens_per_s = 1e6;
  s.tflops_per_gpu = 400;
  s.mfu = 0.4;
  s.encoder_compute.max = encoder_max_ns;
  s.encoder_compute.worst_rank = 0;
  s.peak_memory.max = 40'000'000'000;
  s.info.add_modules()->set_name("llm");
  ir::ModuleInfo* vit = s.info.add_modules();
  vit->set_name("vit");
  vit->set_is_encoder(true);
  // Rank 0 stands for 3 GPUs, rank 3 for 1: warm-up 100 and 200 ns → mean 125.
  s.ranks = {rank(0, {0, 1, 2}, t_ns - 100 - 40 - 8, 100, 40, 8), rank(3, {3}, t_ns - 200 - 80, 200, 80, 0)};
  return s;
}

Comparison comparison() {
  Comparison c;
  c.scenario_name = "mm \"quoted\"";
  c.scenario_file = "tests/data/mm.pbtxt";
  c.cost_model = "analytic";
  c.folded = true;
  c.llm_only = summary(7 * kMs, 8, 0);
  c.placements.push_back({scenario::MEGATRON_BASELINE, summary(10 * kMs, 8, 3 * kMs), {}, {}, {}});
  c.placements.push_back({scenario::MEGATRON_BALANCED, std::nullopt, "mm.pbtxt:3:1: MEGATRON_BALANCED: not applicable here",
                          "MEGATRON_BALANCED: not applicable here", {}});
  Summary optimus = summary(8 * kMs, 8, 4 * kMs);
  optimus.info.mutable_optimus()->set_coarse_efficiency(0.5);
  optimus.info.mutable_optimus()->set_fine_efficiency(0.9);
  c.placements.push_back({scenario::OPTIMUS, optimus, {}, {}, {}});
  c.placements.push_back({scenario::HETEROGENEOUS, summary(6 * kMs, 10, 2 * kMs), {}, {}, {}});
  return c;
}

TEST(EncoderHiddenFraction, FollowsTheDefinitionAndClamps) {
  // 1 − (8 − 7) / 4 = 0.75
  EXPECT_DOUBLE_EQ(*encoder_hidden_fraction(TimeNs(8 * kMs), TimeNs(7 * kMs), TimeNs(4 * kMs)), 0.75);
  // The placement added more than all its encoder compute: nothing hidden.
  EXPECT_DOUBLE_EQ(*encoder_hidden_fraction(TimeNs(12 * kMs), TimeNs(7 * kMs), TimeNs(4 * kMs)), 0.0);
  // Faster than the LLM alone (e.g. more GPUs): all hidden.
  EXPECT_DOUBLE_EQ(*encoder_hidden_fraction(TimeNs(6 * kMs), TimeNs(7 * kMs), TimeNs(4 * kMs)), 1.0);
  EXPECT_FALSE(encoder_hidden_fraction(TimeNs(8), std::nullopt, TimeNs(4)).has_value());
  EXPECT_FALSE(encoder_hidden_fraction(TimeNs(8), TimeNs(7), TimeNs(0)).has_value()) << "no encoder compute";
}

TEST(MeanBubbles, WeightsRepresentedRanksAndAddsUp) {
  const MeanBubbles m = mean_bubbles(summary(10 * kMs, 4, 0));
  EXPECT_EQ(m.of(Bubble::kPpWarmup), (3 * 100 + 200) / 4);
  EXPECT_EQ(m.of(Bubble::kPpOther), (3 * 40 + 80) / 4);
  EXPECT_EQ(m.of(Bubble::kBoundaryExposed), 3 * 8 / 4);
  EXPECT_EQ(m.total, (3 * 148 + 280) / 4);
  EXPECT_EQ(mean_bubbles(Summary{}).total, 0);
}

TEST(PlacementMetrics, SpeedupOverTheBaselineAndHiddenFraction) {
  const Comparison c = comparison();
  EXPECT_DOUBLE_EQ(*placement_metrics(c, 0).speedup, 1.0);
  EXPECT_FALSE(placement_metrics(c, 1).speedup.has_value()) << "failed placement";
  EXPECT_DOUBLE_EQ(*placement_metrics(c, 2).speedup, 10.0 / 8.0);
  EXPECT_DOUBLE_EQ(*placement_metrics(c, 3).speedup, 10.0 / 6.0);
  EXPECT_DOUBLE_EQ(*placement_metrics(c, 0).encoder_hidden, 0.0);   // 1 − 3/3
  EXPECT_DOUBLE_EQ(*placement_metrics(c, 2).encoder_hidden, 0.75);  // 1 − 1/4
  EXPECT_DOUBLE_EQ(*placement_metrics(c, 3).encoder_hidden, 1.0);   // clamped
  Comparison no_base = c;
  no_base.placements.erase(no_base.placements.begin());
  EXPECT_FALSE(placement_metrics(no_base, 1).speedup.has_value()) << "no baseline, no speedup";
  Comparison no_llm = c;
  no_llm.llm_only.reset();
  EXPECT_FALSE(placement_metrics(no_llm, 2).encoder_hidden.has_value());
}

TEST(CompareTable, SideBySideWithReasonsAndTerminalOnlyWallTimes) {
  const std::string out = format_comparison(comparison(), CompareRunStats{1.5, 0.25});
  for (const char* s : {"Megatron baseline", "Megatron balanced", "Optimus", "heterogeneous", "speedup vs Megatron baseline",
                        "1.250 ×", "1.667 ×", "75.00 %", "100.00 %", "50.0 % / 90.0 %", "PP warm-up + cool-down",
                        "host (launch/framework)", "boundary exposed", "encoder comm exposed", "40.00 GB", "not simulated",
                        "MEGATRON_BALANCED: not applicable here", "LLM alone", "7.000 ms",
                        "Optimus planner              0.250 s wall", "compare                      1.500 s wall"}) {
    EXPECT_NE(out.find(s), std::string::npos) << s << "\n" << out;
  }
  // The GPUs row: 8, —, 8, 10 (islands count).
  const size_t gpus = out.find("  GPUs");
  ASSERT_NE(gpus, std::string::npos);
  const std::string line = out.substr(gpus, out.find('\n', gpus) - gpus);
  EXPECT_NE(line.find("—"), std::string::npos) << line;
  EXPECT_NE(line.find("10"), std::string::npos) << line;
  // Mean warm-up + cool-down of 125 ns on a 10 ms iteration.
  EXPECT_NE(out.find("125 ns · 0.0 %"), std::string::npos) << out;
  EXPECT_EQ(out.find("mm.pbtxt:3:1"), std::string::npos) << "the table gives the reason without the location";
  const std::string no_optimus = format_comparison(comparison(), CompareRunStats{1.5, std::nullopt});
  EXPECT_EQ(no_optimus.find("Optimus planner"), std::string::npos);
}

TEST(CompareJson, KeysUnitsFailuresAndNoWallClock) {
  const Comparison c = comparison();
  const std::string text = comparison_json(c);
  EXPECT_EQ(text, comparison_json(c)) << "deterministic";
  EXPECT_EQ(text.find("wall"), std::string::npos);
  EXPECT_EQ(text.find("planner"), std::string::npos);
  const auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j["scenario"], "mm \"quoted\"");
  EXPECT_EQ(j["mode"], "folded");
  EXPECT_EQ(j["baseline"], "MEGATRON_BASELINE");
  EXPECT_DOUBLE_EQ(j["llm_only"]["iteration_time_s"].get<double>(), 0.007);
  ASSERT_EQ(j["placements"].size(), 4u);
  const auto& base = j["placements"][0];
  EXPECT_EQ(base["placement"], "MEGATRON_BASELINE");
  EXPECT_EQ(base["status"], "ok");
  for (const char* key : {"placement", "name", "status", "num_gpus", "iteration_time_s", "iteration_time_ns", "speedup",
                          "tokens_per_s", "tflops_per_gpu", "mfu", "hfu", "peak_memory_bytes", "bubbles",
                          "encoder_compute_max_s", "encoder_hidden_fraction", "modules"}) {
    EXPECT_TRUE(base.contains(key)) << key;
  }
  for (const char* key : {"pp_warmup_cooldown_s", "pp_other_s", "tp_exposed_s", "cp_exposed_s", "dp_exposed_s",
                          "pp_exposed_s", "host_overhead_s", "boundary_exposed_s", "encoder_comm_exposed_s", "total_s"}) {
    EXPECT_TRUE(base["bubbles"].contains(key)) << key;
  }
  EXPECT_DOUBLE_EQ(base["bubbles"]["pp_warmup_cooldown_s"].get<double>(), 125e-9);
  EXPECT_DOUBLE_EQ(base["speedup"].get<double>(), 1.0);
  EXPECT_EQ(base["peak_memory_bytes"], 40'000'000'000);
  const auto& failed = j["placements"][1];
  EXPECT_EQ(failed["status"], "failed");
  EXPECT_EQ(failed["error"], "mm.pbtxt:3:1: MEGATRON_BALANCED: not applicable here") << "the full message";
  EXPECT_FALSE(failed.contains("iteration_time_s"));
  EXPECT_DOUBLE_EQ(j["placements"][2]["encoder_hidden_fraction"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(j["placements"][2]["optimus"]["fine_efficiency"].get<double>(), 0.9);
  EXPECT_FALSE(j["placements"][0].contains("optimus"));
  EXPECT_EQ(j["placements"][3]["num_gpus"], 10);
  // One line per top-level key (ranking included) and per placement.
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 10 + 1 + 4 + 2);  // verdict included
  EXPECT_EQ(j["ranking"], nlohmann::json({"HETEROGENEOUS", "OPTIMUS", "MEGATRON_BASELINE"}));
  EXPECT_EQ(base["rank"], 3);
  EXPECT_TRUE(base["fits"].get<bool>());
  EXPECT_FALSE(base.contains("infeasible_reason"));
}

// A placement over HBM is shown but not ranked; the others rank without it,
// and nothing is a speedup over an infeasible baseline.
TEST(CompareRanking, OnlyPlacementsThatFitAreRanked) {
  Comparison c = comparison();
  c.placements[3].over_memory = "8 of 10 ranks exceed HBM: rank 0 peaks at 90.00 GB > 85.90 GB (…)";
  EXPECT_EQ(feasible_ranking(c), (std::vector<size_t>{2, 0}));  // Optimus 8 ms, baseline 10 ms
  EXPECT_EQ(*placement_metrics(c, 2).rank, 1);
  EXPECT_EQ(*placement_metrics(c, 0).rank, 2);
  EXPECT_FALSE(placement_metrics(c, 3).rank.has_value());
  EXPECT_FALSE(placement_metrics(c, 3).speedup.has_value());
  EXPECT_FALSE(placement_metrics(c, 1).rank.has_value()) << "failed placement";
  const std::string out = format_comparison(c, CompareRunStats{});
  EXPECT_NE(out.find("(!) does not fit HBM, not ranked"), std::string::npos) << out;
  EXPECT_NE(out.find("heterogeneous        8 of 10 ranks exceed HBM: rank 0 peaks at 90.00 GB > 85.90 GB"),
            std::string::npos)
      << out;
  const size_t row = out.find("  rank (of those that fit HBM)");
  ASSERT_NE(row, std::string::npos);
  const std::string line = out.substr(row, out.find('\n', row) - row);
  EXPECT_NE(line.find("over HBM"), std::string::npos) << line;
  auto j = nlohmann::json::parse(comparison_json(c));
  EXPECT_EQ(j["ranking"], nlohmann::json({"OPTIMUS", "MEGATRON_BASELINE"}));
  EXPECT_FALSE(j["placements"][3]["fits"].get<bool>());
  EXPECT_TRUE(j["placements"][3]["rank"].is_null());
  EXPECT_EQ(j["placements"][3]["infeasible_reason"], c.placements[3].over_memory);
  // The baseline over HBM: no speedup anywhere.
  c.placements[0].over_memory = "over";
  j = nlohmann::json::parse(comparison_json(c));
  EXPECT_TRUE(j["baseline"].is_null());
  EXPECT_TRUE(j["placements"][2]["speedup"].is_null());
  EXPECT_EQ(j["ranking"], nlohmann::json({"OPTIMUS"}));
}

TEST(CompareTable, LongReasonsWrapInsteadOfBeingCut) {
  Comparison c = comparison();
  std::string reason;
  for (int i = 0; i < 30; ++i) reason += "word" + std::to_string(i) + " ";
  reason += "END";
  c.placements[1].reason = reason;
  const std::string out = format_comparison(c, CompareRunStats{});
  EXPECT_NE(out.find("END\n"), std::string::npos) << out;
  const size_t at = out.find("word0");
  ASSERT_NE(at, std::string::npos);
  EXPECT_NE(out.find("\n" + std::string(25, ' ') + "word", at), std::string::npos) << "continuation indented\n" << out;
}

TEST(CompareJson, WithoutBaselineOrLlmReference) {
  Comparison c = comparison();
  c.placements.erase(c.placements.begin());
  c.llm_only.reset();
  c.llm_only_error = "LLM alone: bad";
  const auto j = nlohmann::json::parse(comparison_json(c));
  EXPECT_TRUE(j["baseline"].is_null());
  EXPECT_EQ(j["llm_only"]["error"], "LLM alone: bad");
  EXPECT_TRUE(j["placements"][1]["speedup"].is_null());
  EXPECT_TRUE(j["placements"][1]["encoder_hidden_fraction"].is_null());
}

}  // namespace
}  // namespace lacuna::report
