// A sweep's journal (sweep_run.h): an interrupted sweep resumed from it gives
// the same points as one that ran through, its bad records are refused by
// line, and a journal of another sweep is refused.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sim/core/error.h"
#include "sim/report/analyses/run_metrics.h"
#include "sim/sweep/sweep_grid.h"
#include "sim/sweep/sweep_run.h"

namespace lacuna::sweep {
namespace {

namespace fs = std::filesystem;

struct Fixture {
  Fixture() {
    dir = fs::temp_directory_path() / ("lacuna-sweep-journal-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    settings.scenario = std::string(LACUNA_SOURCE_DIR) + "/scenarios/llm/gpt-1.3b-8gpu.pbtxt";
    settings.fold = true;
    settings.network = run::NetworkMode::kAnalytic;
    settings.journal = (dir / "j").string();
  }
  ~Fixture() { fs::remove_all(dir); }
  std::vector<std::string> lines() const {
    std::vector<std::string> out;
    std::ifstream in(settings.journal);
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
  }
  void keep(const std::vector<std::string>& ls, size_t whole, const std::string& tail) const {
    std::ofstream out(settings.journal, std::ios::trunc);
    for (size_t i = 0; i < whole; ++i) out << ls[i] << "\n";
    out << tail;
  }
  fs::path dir;
  SweepSettings settings;
};

std::vector<std::string> records(const std::vector<report::RunMetrics>& ms) {
  std::vector<std::string> out;
  for (const auto& m : ms) out.push_back(report::metrics_record(m));
  return out;
}

TEST(SweepJournal, AResumedSweepGivesTheSamePointsAndRefusesBadRecords) {
  Fixture f;
  const Grid grid = make_grid({"training.global_batch=8,16,32,64"}, false);
  const auto whole = run_sweep(parallel::World{}, grid, f.settings, 2, {});
  const std::vector<std::string> ls = f.lines();
  ASSERT_EQ(ls.size(), 5u);  // the header and four points
  // Interrupted after two points, the third cut short.
  f.keep(ls, 3, ls[3].substr(0, 10));
  f.settings.resume = true;
  size_t resumed = 0;
  const auto again = run_sweep(parallel::World{}, grid, f.settings, 2, {}, {}, &resumed);
  EXPECT_EQ(resumed, 2u);
  EXPECT_EQ(records(whole), records(again));
  ASSERT_EQ(f.lines().size(), 5u);  // rewritten without the cut record
  // A record edited: refused by its line, never used.
  std::vector<std::string> edited = f.lines();
  const size_t at = edited[2].find("\"mfu\":");
  ASSERT_NE(at, std::string::npos);
  edited[2][at + 7] = edited[2][at + 7] == '1' ? '2' : '1';
  f.keep(edited, edited.size(), "");
  try {
    (void)run_sweep(parallel::World{}, grid, f.settings, 2, {});
    FAIL() << "an edited record was used";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(":3:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("checksum"), std::string::npos) << e.what();
  }
  // The journal of another sweep (other values) is refused.
  f.keep(ls, ls.size(), "");
  const Grid other = make_grid({"training.global_batch=8,16,32,128"}, false);
  try {
    (void)run_sweep(parallel::World{}, other, f.settings, 2, {});
    FAIL() << "another sweep's journal was used";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("another sweep"), std::string::npos) << e.what();
  }
}

TEST(SweepJournal, RecordsOfFiguresNoRunGivesAreRefused) {
  EXPECT_THROW(check_sweep_record("{}", SourceLocation{}), Error);
  EXPECT_THROW(check_sweep_record("not json", SourceLocation{}), Error);
  report::RunMetrics m;
  m.num_gpus = 8;
  m.iteration_time_ns = 1000;
  m.mfu = 0.4;
  EXPECT_NO_THROW(check_sweep_record(report::metrics_record(m), SourceLocation{}));
  m.mfu = 1.69;
  EXPECT_THROW(check_sweep_record(report::metrics_record(m), SourceLocation{}), Error);
}

}  // namespace
}  // namespace lacuna::sweep
