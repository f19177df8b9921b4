// The verdict line of `lacuna compare` on hand-made summaries: the best
// placement that fits HBM and its margin, the heterogeneous modes, what
// limits the non-colocated one; a placement over HBM is never named best.
#include "sim/report/analyses/compare_verdict.h"

#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace lacuna::report {
namespace {

constexpr int64_t kMs = 1'000'000;

RankAccount idle_rank(int32_t r, std::vector<int32_t> represents, int64_t t, int64_t idle) {
  RankAccount a;
  a.rank = r;
  a.represents = std::move(represents);
  a.busy = TimeNs(t - idle);
  a.bubbles[static_cast<size_t>(Bubble::kPpOther)] = TimeNs(idle);
  return a;
}

// T ms on `llm_gpus` LLM ranks (idle `llm_idle` each) plus `island` island
// ranks (idle `island_idle` each), one representative per side.
Summary summary(int64_t t, int32_t llm_gpus, int64_t llm_idle, int32_t island = 0, int64_t island_idle = 0) {
  Summary s;
  s.num_gpus = llm_gpus + island;
  s.iteration_time = TimeNs(t);
  auto* llm = s.info.add_modules();
  llm->set_name("llm");
  llm->set_first_rank(0);
  llm->set_num_ranks(llm_gpus);
  auto* vit = s.info.add_modules();
  vit->set_name("vit");
  vit->set_is_encoder(true);
  std::vector<int32_t> l, i;
  for (int32_t r = 0; r < llm_gpus; ++r) l.push_back(r);
  for (int32_t r = 0; r < island; ++r) i.push_back(llm_gpus + r);
  s.ranks.push_back(idle_rank(0, l, t, llm_idle));
  if (island > 0) s.ranks.push_back(idle_rank(llm_gpus, i, t, island_idle));
  return s;
}

PlacementOutcome outcome(scenario::PlacementKind kind, Summary s, std::string variant = {}) {
  PlacementOutcome p;
  p.kind = kind;
  p.summary = std::move(s);
  p.variant = std::move(variant);
  if (!p.variant.empty()) p.layout = "vit TP1 PP1 DP8";
  return p;
}

Comparison fixture() {
  Comparison c;
  c.scenario_name = "mm";
  c.placements.push_back(outcome(scenario::MEGATRON_BASELINE, summary(12 * kMs, 8, 1 * kMs)));
  c.placements.push_back(outcome(scenario::OPTIMUS, summary(11 * kMs, 8, 1 * kMs)));
  c.placements.push_back(outcome(scenario::HETEROGENEOUS, summary(10 * kMs, 8, 1 * kMs), "colocated"));
  // Non-colocated: 10.74 ms, island idle 0 %, LLM idle 9 % (0.9666 ms).
  c.placements.push_back(
      outcome(scenario::HETEROGENEOUS, summary(10'740'000, 8, 966'600, 8, 0), "non-colocated"));
  return c;
}

TEST(CompareVerdict, IdleSharesSplitIslandAndLlmRanks) {
  const auto sh = island_idle_shares(summary(10 * kMs, 8, 1 * kMs, 2, 5 * kMs));
  ASSERT_TRUE(sh.has_value());
  EXPECT_DOUBLE_EQ(sh->llm, 0.1);
  EXPECT_DOUBLE_EQ(sh->island, 0.5);
  EXPECT_FALSE(island_idle_shares(summary(10 * kMs, 8, 1 * kMs)).has_value()) << "no island";
}

TEST(CompareVerdict, NamesTheBestTheModesAndTheLimit) {
  const Comparison c = fixture();
  EXPECT_EQ(comparison_verdict(c),
            "heterogeneous colocated is best, 7.4 % over heterogeneous non-colocated; non-colocated is limited by "
            "encoder-island compute (island idle 0.0 %, LLM idle 9.0 %).");
  // With another placement in between, the modes get their own clause.
  Comparison slower_nc = c;
  slower_nc.placements[3].summary->iteration_time = TimeNs(12'000'000);
  EXPECT_NE(comparison_verdict(slower_nc).find("; heterogeneous colocated beats non-colocated by 20.0 %;"),
            std::string::npos)
      << comparison_verdict(slower_nc);
  // Different GPU counts (the island adds GPUs): the lead per GPU too. Same
  // tokens per iteration, so tokens/s per GPU ∝ 1 / (T · GPUs).
  Comparison per_gpu = c;
  auto& co = *per_gpu.placements[2].summary;
  auto& nc = *per_gpu.placements[3].summary;
  co.tokens_per_s = 1e9 / static_cast<double>(co.iteration_time.count());
  nc.tokens_per_s = 1e9 / static_cast<double>(nc.iteration_time.count());
  const double lead = (co.tokens_per_s / co.num_gpus) / (nc.tokens_per_s / nc.num_gpus) * 100.0 - 100.0;
  EXPECT_NE(comparison_verdict(per_gpu).find(fmt::format("non-colocated (per GPU {:.1f} % ahead, on {} vs {} GPUs)",
                                                         lead, co.num_gpus, nc.num_gpus)),
            std::string::npos)
      << comparison_verdict(per_gpu);
  const std::string table = format_comparison(c, CompareRunStats{});
  EXPECT_NE(table.find("  verdict: heterogeneous colocated is best, 7.4 % over"), std::string::npos) << table;
  EXPECT_NE(table.find("heterogeneous non-colocated"), std::string::npos);
  EXPECT_NE(table.find("    non-colocated        vit TP1 PP1 DP8; idle: island 0.0 %, LLM 9.0 %"), std::string::npos)
      << table;
  const auto j = nlohmann::json::parse(comparison_json(c));
  EXPECT_EQ(j["verdict"], comparison_verdict(c));
  EXPECT_EQ(j["ranking"], nlohmann::json({"HETEROGENEOUS_COLOCATED", "HETEROGENEOUS_NONCOLOCATED", "OPTIMUS",
                                          "MEGATRON_BASELINE"}));
  EXPECT_EQ(j["placements"][3]["variant"], "non-colocated");
  EXPECT_EQ(j["placements"][3]["name"], "heterogeneous non-colocated");
  EXPECT_DOUBLE_EQ(j["placements"][3]["idle_share_llm"].get<double>(), 0.09);
}

TEST(CompareVerdict, APlacementOverHbmIsNeverBest) {
  Comparison c = fixture();
  c.placements[2].over_memory = "rank 0 peaks at 90 GB > 85.9 GB";  // the fastest
  const std::vector<size_t> ranking = feasible_ranking(c);
  ASSERT_FALSE(ranking.empty());
  EXPECT_NE(ranking.front(), 2U);
  EXPECT_EQ(comparison_verdict(c),
            "heterogeneous non-colocated is best, 2.4 % over Optimus; heterogeneous colocated does not fit HBM; "
            "non-colocated is limited by encoder-island compute (island idle 0.0 %, LLM idle 9.0 %).");
  // Over HBM through the simulated ranks alone counts too.
  c.placements[2].over_memory.clear();
  c.placements[2].summary->over_capacity_ranks = 1;
  EXPECT_NE(feasible_ranking(c).front(), 2U);
  for (auto& p : c.placements) p.over_memory = "over";
  EXPECT_EQ(comparison_verdict(c).rfind("no placement fits HBM, none is ranked", 0), 0U) << comparison_verdict(c);
}

TEST(CompareVerdict, TheLlmLimitsWhenTheIslandWaits) {
  Comparison c = fixture();
  c.placements[3].summary = summary(10'740'000, 8, 100'000, 8, 5 * kMs);
  EXPECT_NE(comparison_verdict(c).find("non-colocated is limited by the LLM, the island waits (island idle 46.6 %, "
                                       "LLM idle 0.9 %)"),
            std::string::npos)
      << comparison_verdict(c);
}

}  // namespace
}  // namespace lacuna::report
