// `lacuna search` from the command line: the same bytes serially, on two
// threads and on two MPI processes; the summary for scripts; bad input.
#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sim/parallel/processes.h"
#include "tests/cli_test_util.h"

namespace lacuna {
namespace {

using testing::read_file;
using testing::run_lacuna;
using testing::TempDir;

const std::string kScenario = testing::source_path("scenarios/llm/gpt-1.3b-8gpu.pbtxt");
// About 3,000 plans, the best 8 simulated: well under a second.
const std::string kSpace = kScenario + " --fix parallel.recompute=RECOMPUTE_NONE --fix parallel.cp=1 --simulate 8";

TEST(SearchE2E, ThreadsAndMpiProcessesWriteTheSerialBytes) {
  TempDir dir("search");
  auto outputs = [&](const std::string& tag) {
    return " --csv " + (dir / (tag + ".csv")) + " --json " + (dir / (tag + ".json")) + " --svg " + (dir / (tag + ".svg"));
  };
  const auto serial = run_lacuna("search " + kSpace + " -j 1" + outputs("serial"));
  ASSERT_EQ(serial.exit_code, 0) << serial.output;
  EXPECT_NE(serial.output.find("Spearman rank correlation"), std::string::npos) << serial.output;
  EXPECT_NE(serial.output.find("| rank | id | plan |"), std::string::npos) << serial.output;
  const auto threads = run_lacuna("search " + kSpace + " -j 2" + outputs("threads"));
  ASSERT_EQ(threads.exit_code, 0) << threads.output;
  for (const char* ext : {".csv", ".json", ".svg"}) {
    EXPECT_EQ(read_file(dir / (std::string("threads") + ext)), read_file(dir / (std::string("serial") + ext))) << ext;
  }
  // Every candidate has a row with its fate; the journal is gone.
  const std::string csv = read_file(dir / "serial.csv");
  EXPECT_EQ(csv.rfind("id,num_nodes,gpus,tp,", 0), 0u);
  EXPECT_NE(csv.find(",simulated,"), std::string::npos);
  EXPECT_NE(csv.find(",batch,"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir / "serial.csv.journal"));
  if (const std::string why = testing::mpi_unavailable(); !why.empty()) GTEST_SKIP() << why;
  const auto mpi = testing::run_lacuna_mpi(2, "search " + kSpace + " -j 1" + outputs("mpi"));
  ASSERT_EQ(mpi.exit_code, 0) << mpi.output;
  for (const char* ext : {".csv", ".json", ".svg"}) {
    EXPECT_EQ(read_file(dir / (std::string("mpi") + ext)), read_file(dir / (std::string("serial") + ext))) << ext;
  }
  EXPECT_NE(mpi.output.find("2 processes"), std::string::npos) << mpi.output;
}

TEST(SearchE2E, SummaryOnlyPrintsOneJsonDocumentAndWritesNothing) {
  TempDir dir("search-summary");
  const auto r = run_lacuna("search " + kSpace + " --out-dir " + (dir / "out") + " --summary-only 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["scenario"], "gpt-1.3b-8gpu");
  EXPECT_FALSE(j.contains("candidates"));
  EXPECT_EQ(j["fates"]["simulated"].get<int>() + j["fates"]["over-memory-compiled"].get<int>() +
                j["fates"]["compile-failed"].get<int>() + j["fates"]["over-gpu-budget"].get<int>(),
            8);
  EXPECT_GE(j["top"].size(), 1u);
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "out" / "gpt-1.3b-8gpu.search.csv"));
}

TEST(SearchE2E, BadConstraintsFailBeforeAnyOutput) {
  TempDir dir("search-bad");
  const std::string out = " --csv " + (dir / "s.csv") + " --svg " + (dir / "s.svg");
  for (const auto& [flags, expected] : std::vector<std::pair<std::string, std::string>>{
           {"--fix parallel.tp=3", "search space is empty"},
           {"--fix parallel.tp=2 --fix parallel.tp=4", "contradict"},
           {"--fix model.llm.hidden_size=1024", "not a search dimension"},
           {"--set model.llm.no_such_field=1", "no_such_field"},
           {"--gpus 9..15", "no whole number of 8-GPU nodes"},
           {"--gpus 64..8", "--gpus"}}) {
    const auto r = run_lacuna("search " + kScenario + " " + flags + out);
    EXPECT_EQ(r.exit_code, 2) << flags << "\n" << r.output;
    EXPECT_NE(r.output.find(expected), std::string::npos) << flags << "\n" << r.output;
    EXPECT_FALSE(std::filesystem::exists(dir / "s.csv")) << flags;
  }
}

}  // namespace
}  // namespace lacuna
