#include "sim/search/search_run.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sim/core/error.h"
#include "sim/placement/compile.h"
#include "sim/run/simulation_input.h"
#include "sim/run/simulation_run.h"
#include "sim/search/search_outputs.h"
#include "sim/search/search_test_support.h"

namespace lacuna::search {
namespace {

std::string scenario_path() { return std::string(LACUNA_SOURCE_DIR) + "/scenarios/llm/gpt-1.3b-8gpu.pbtxt"; }

// A space small enough to simulate every plan of it.
SearchOptions small_space() {
  SearchOptions o;
  o.scenario = scenario_path();
  o.fixes = {"parallel.recompute=RECOMPUTE_NONE", "parallel.distributed_optimizer=true",
             "parallel.overlap_grad_reduce=true",  "execution.tp_comm_overlap=false",
             "execution.pipeline_p2p=P2P_OVERLAPPED", "parallel.layer_split=even",
             "parallel.cp=1",                      "training.micro_batch=1,2"};
  o.simulate_top = 100000;
  o.jobs = 2;
  return o;
}

// The search equals brute force: every (tp, sp, pp, v, schedule,
// micro-batch) the test's own loops build, validated and simulated one by
// one, gives the same set of valid plans and the same best.
TEST(Search, EqualsBruteForceOnASmallSpace) {
  const SearchResult r = run_search(small_space(), parallel::World{});
  const scenario::LoadedScenario base = scenario::load_scenario(scenario_path());
  int valid = 0;
  double best = 0;
  std::string best_plan;
  for (int64_t tp : {1, 2, 4, 8}) {
    for (bool sp : {false, true}) {
      if (sp && tp == 1) continue;
      for (int64_t pp = 1; pp <= 8; ++pp) {
        if (8 % (tp * pp) != 0) continue;
        for (int64_t v = 1; v <= 24; ++v) {
          for (auto kind : {scenario::ONE_F_ONE_B, scenario::ZB_H1, scenario::INTERLEAVED_1F1B}) {
            if ((kind == scenario::INTERLEAVED_1F1B) != (v > 1)) continue;
            if (pp == 1 && kind != scenario::ONE_F_ONE_B) continue;
            for (int64_t mb : {1, 2}) {
              scenario::LoadedScenario s = base;
              auto* p = s.spec.mutable_parallel();
              p->set_tp(tp);
              p->set_sequence_parallel(sp);
              p->set_cp(1);
              p->set_pp(pp);
              p->set_dp(8 / (tp * pp));
              p->set_virtual_stages(v);
              p->set_recompute(scenario::RECOMPUTE_NONE);
              p->set_distributed_optimizer(true);
              p->set_overlap_grad_reduce(p->dp() > 1);
              p->set_overlap_param_gather(p->dp() > 1);
              if (p->dp() == 1) p->set_distributed_optimizer(false);
              s.spec.mutable_schedule()->set_kind(kind);
              s.spec.mutable_training()->set_micro_batch(mb);
              s.spec.mutable_execution()->set_tp_comm_overlap(false);
              s.spec.mutable_execution()->set_pipeline_p2p(pp > 1 ? scenario::P2P_OVERLAPPED : scenario::P2P_UNSPECIFIED);
              try {
                scenario::validate_scenario(s.spec, s.locations);
              } catch (const Error&) {
                continue;
              }
              ++valid;
              const auto cost = run::make_cost_model({}, s.spec.cluster(), s.spec.training().precision());
              const ir::Program program = placement::compile(s, *cost);
              run::RunSettings settings;
              settings.fold = true;
              run::SimulationRun run(program, *cost, settings);
              const double tps = run.run().tokens_per_s;
              if (tps > best) {
                best = tps;
                best_plan = s.spec.parallel().ShortDebugString() + " mb " + std::to_string(mb) + " " +
                            scenario::ScheduleKind_Name(kind);
              }
            }
          }
        }
      }
    }
  }
  int64_t searched_valid = 0;
  for (const Candidate& c : r.candidates) searched_valid += !is_pruned(c.fate) || c.fate == Fate::kOverMemoryBound;
  EXPECT_EQ(searched_valid, valid);
  EXPECT_EQ(r.fate_counts[static_cast<size_t>(Fate::kScreened)], 0);  // every valid plan was simulated
  ASSERT_FALSE(r.ranking.empty());
  EXPECT_DOUBLE_EQ(r.candidates[r.ranking.front()].simulated->tokens_per_s, best) << best_plan;
}

TEST(Search, TheOutputsDoNotDependOnTheThreads) {
  SearchOptions o = small_space();
  o.simulate_top = 12;
  o.jobs = 1;
  const SearchResult one = run_search(o, parallel::World{});
  o.jobs = 3;
  const SearchResult three = run_search(o, parallel::World{});
  EXPECT_EQ(search_csv(one), search_csv(three));
  EXPECT_EQ(search_json(one, 10, false), search_json(three, 10, false));
  EXPECT_EQ(search_svg(one), search_svg(three));
}

TEST(Search, AResumedSearchReusesTheJournalAndGivesTheSameResult) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "lacuna-search-resume-test";
  std::filesystem::create_directories(dir);
  SearchOptions o = small_space();
  o.simulate_top = 10;
  o.journal = (dir / "journal").string();
  const SearchResult whole = run_search(o, parallel::World{});
  // Cut the journal to its header and three records, as an interruption would.
  std::vector<std::string> lines;
  {
    std::ifstream in(o.journal);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
  }
  ASSERT_EQ(lines.size(), 11u);
  {
    std::ofstream out(o.journal, std::ios::trunc);
    for (size_t i = 0; i < 4; ++i) out << lines[i] << "\n";
    out << lines[4].substr(0, lines[4].size() / 2);  // a record cut short
  }
  o.resume = true;
  const SearchResult resumed = run_search(o, parallel::World{});
  EXPECT_EQ(search_csv(whole), search_csv(resumed));
  int reused = 0;
  for (const Candidate& c : resumed.candidates) reused += c.simulated && c.simulated->resumed;
  EXPECT_EQ(reused, 3);
  // The resumed run rewrote the journal without the cut-short record: cut
  // again (an interruption of the resumed run), it resumes again.
  lines.clear();
  {
    std::ifstream in(o.journal);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
  }
  ASSERT_EQ(lines.size(), 11u);
  {
    std::ofstream out(o.journal, std::ios::trunc);
    for (size_t i = 0; i < 7; ++i) out << lines[i] << "\n";
    out << lines[7].substr(0, 5);
  }
  const SearchResult again = run_search(o, parallel::World{});
  EXPECT_EQ(search_csv(whole), search_csv(again));
  reused = 0;
  for (const Candidate& c : again.candidates) reused += c.simulated && c.simulated->resumed;
  EXPECT_EQ(reused, 6);
  // A journal of another search is refused, naming the file.
  o.fixes.push_back("parallel.tp=2");
  try {
    run_search(o, parallel::World{});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("another search"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

TEST(Search, BadConstraintsAreClearErrors) {
  auto error_of = [](SearchOptions o) {
    try {
      run_search(o, parallel::World{});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  SearchOptions o;
  o.scenario = scenario_path();
  o.fixes = {"model.llm.hidden_size=1024"};
  EXPECT_NE(error_of(o).find("not a search dimension"), std::string::npos) << error_of(o);
  o.fixes = {"parallel.tp=2", "parallel.tp=4"};
  EXPECT_NE(error_of(o).find("contradict"), std::string::npos) << error_of(o);
  o.fixes = {"parallel.tp=3"};
  EXPECT_NE(error_of(o).find("search space is empty"), std::string::npos) << error_of(o);
  o.fixes = {"parallel.tp=eight"};
  EXPECT_NE(error_of(o).find("`fix parallel.tp"), std::string::npos) << error_of(o);
  o.fixes = {};
  o.gpus = GpuRange{9, 15};
  EXPECT_NE(error_of(o).find("no whole number of 8-GPU nodes"), std::string::npos) << error_of(o);
}

TEST(Spearman, ClosedForms) {
  EXPECT_DOUBLE_EQ(*spearman({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0);
  EXPECT_DOUBLE_EQ(*spearman({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0);
  // 1 − 6 Σd² / (n(n² − 1)) without ties: d = (0, 1, −1), Σd² = 2, n = 3.
  EXPECT_DOUBLE_EQ(*spearman({1, 2, 3}, {1, 3, 2}), 0.5);
  EXPECT_FALSE(spearman({1, 2}, {1, 2}).has_value());
  EXPECT_FALSE(spearman({1, 1, 1}, {1, 2, 3}).has_value());
}

TEST(ParetoFront, KeepsOnlyUnbeatenPoints) {
  // x: memory (lower is better), y: throughput (higher is better).
  const std::vector<double> x = {10, 20, 15, 30, 20, 40};
  const std::vector<double> y = {5, 9, 4, 12, 9, 11};
  EXPECT_EQ(pareto_front(x, y), (std::vector<size_t>{0, 1, 3}));
}

}  // namespace
}  // namespace lacuna::search
