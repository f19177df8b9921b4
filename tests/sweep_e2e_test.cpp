// End-to-end: `lacuna sweep` (docs/sweep.md) and the `--csv` outputs of
// `lacuna simulate` and `lacuna compare` (docs/outputs.md#csv), as a user
// runs them, on the 8-GPU GPT 1.3B scenario and the tiny ViT + GPT one.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/parallel/processes.h"
#include "tests/cli_test_util.h"

namespace lacuna::testing {
namespace {

const std::string kSmall = source_path("scenarios/llm/gpt-1.3b-8gpu.pbtxt");
const std::string kTiny = source_path("tests/data/tiny-vit-gpt-8gpu.pbtxt");

// Four points of two fields, each a few tenths of a second.
const std::string kGrid = "--set training.micro_batch=1,2 --set schedule.kind=GPIPE,ONE_F_ONE_B";

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  size_t at = 0;
  for (size_t nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1) out.push_back(text.substr(at, nl - at));
  return out;
}

// One CSV record's fields (RFC 4180 quoting; no line breaks inside).
std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      out.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

bool empty_dir(const TempDir& dir) { return std::filesystem::is_empty(dir.path()); }

// Each point's figures are those of `lacuna simulate --set …` on its own.
TEST(SweepE2E, PointsEqualSeparateSimulateRuns) {
  TempDir dir("sweep-eq");
  const auto r = run_lacuna("sweep " + kSmall + " " + kGrid + " --samples 2 --seed 3 -j 2 --json " + (dir / "s.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto sweep = nlohmann::json::parse(read_file(dir / "s.json"));
  ASSERT_EQ(sweep["points"].size(), 4u);
  const std::vector<std::vector<std::string>> sets = {{"training.micro_batch=1", "schedule.kind=GPIPE"},
                                                      {"training.micro_batch=1", "schedule.kind=ONE_F_ONE_B"},
                                                      {"training.micro_batch=2", "schedule.kind=GPIPE"},
                                                      {"training.micro_batch=2", "schedule.kind=ONE_F_ONE_B"}};
  for (size_t p = 0; p < sets.size(); ++p) {
    const std::string json = dir / fmt::format("p{}.json", p);
    const auto s = run_lacuna("simulate " + kSmall + " --set " + sets[p][0] + " --set " + sets[p][1] +
                              " --samples 2 --seed 3 --no-trace --no-svg --json " + json);
    ASSERT_EQ(s.exit_code, 0) << s.output;
    const auto sim = nlohmann::json::parse(read_file(json));
    const auto& m = sweep["points"][p]["metrics"];
    SCOPED_TRACE(sets[p][0] + " " + sets[p][1]);
    EXPECT_EQ(m["iteration_s"].get<double>(), sim["iteration_time_s"].get<double>());
    EXPECT_EQ(m["mfu"].get<double>(), sim["mfu"].get<double>());
    EXPECT_EQ(m["tokens_per_s"].get<double>(), sim["tokens_per_s"].get<double>());
    EXPECT_EQ(m["iteration_s_mean"].get<double>(), sim["monte_carlo"]["iteration_time_s"]["mean"].get<double>());
    EXPECT_EQ(m["mfu_p90"].get<double>(), sim["monte_carlo"]["mfu"]["p90"].get<double>());
    EXPECT_EQ(m["samples"], 2);
  }
  // The table names every point and the best one.
  EXPECT_NE(r.output.find("| 4 | 2 | ONE_F_ONE_B |"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("best MFU  point"), std::string::npos) << r.output;
}

TEST(SweepE2E, ThreadCountsGiveByteIdenticalOutputs) {
  TempDir dir("sweep-j");
  for (const char* j : {"1", "2"}) {
    const std::string tag = j;
    const auto r =
        run_lacuna("sweep " + kSmall + " " + kGrid + " --fold -j " + tag + " --csv " + (dir / (tag + ".csv")) +
                   " --json " + (dir / (tag + ".json")) + " --svg " + (dir / (tag + ".svg")));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  EXPECT_EQ(read_file(dir / "1.csv"), read_file(dir / "2.csv"));
  EXPECT_EQ(read_file(dir / "1.json"), read_file(dir / "2.json"));
  EXPECT_EQ(read_file(dir / "1.svg"), read_file(dir / "2.svg"));
  const std::vector<std::string> csv = lines_of(read_file(dir / "1.csv"));
  ASSERT_EQ(csv.size(), 5u);
  EXPECT_EQ(csv[0].rfind("point,training.micro_batch,schedule.kind,num_gpus,iteration_s,", 0), 0u) << csv[0];
  EXPECT_EQ(csv[3].rfind("3,2,GPIPE,8,", 0), 0u) << csv[3];
}

TEST(SweepE2E, TwoMpiProcessesWriteTheSerialBytes) {
  if (const std::string why = testing::mpi_unavailable(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir("sweep-mpi");
  const std::string args = "sweep " + kSmall + " " + kGrid + " --fold -j 1 --csv ";
  const auto serial = run_lacuna(args + (dir / "serial.csv") + " --json " + (dir / "serial.json"));
  ASSERT_EQ(serial.exit_code, 0) << serial.output;
  const auto mpi = testing::run_lacuna_mpi(2, args + (dir / "mpi.csv") + " --json " + (dir / "mpi.json"));
  const std::string& output = mpi.output;
  ASSERT_EQ(mpi.exit_code, 0) << output;
  EXPECT_EQ(read_file(dir / "mpi.csv"), read_file(dir / "serial.csv"));
  EXPECT_EQ(read_file(dir / "mpi.json"), read_file(dir / "serial.json"));
  // Only the root prints: one table.
  size_t tables = 0;
  for (size_t at = output.find("lacuna sweep:"); at != std::string::npos; at = output.find("lacuna sweep:", at + 1))
    ++tables;
  EXPECT_EQ(tables, 1u) << output;
}

TEST(SweepE2E, SummaryOnlyPrintsOneJsonDocument) {
  const auto r = run_lacuna("sweep " + kSmall + " --set training.micro_batch=1,2 --fold --summary-only 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["points"].size(), 2u);
  EXPECT_EQ(j["settings"]["mode"], "folded");
}

// Bad input: exit 2, a message naming what is wrong, and no file written.
TEST(SweepE2E, BadInputsFailBeforeAnyFileIsWritten) {
  TempDir dir("sweep-bad");
  const std::string outputs = " --csv " + (dir / "s.csv") + " --json " + (dir / "s.json") + " --svg " + (dir / "s.svg");
  struct Case {
    std::string args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"--set parallel.tpp=1,2", "--set parallel.tpp=1,2: parallel.tpp: ParallelPlan has no field \"tpp\""},
      {"--set cluster.num_nodes=1,7 --set training.global_batch=32,96 --zip",
       "sweep point 2 of 2 (cluster.num_nodes=7, training.global_batch=96): "},
      {"--set cluster.num_nodes=1,2,4 --set training.global_batch=32,64 --zip",
       "--zip: the lists advance together, but --set cluster.num_nodes=1,2,4 has 3 values and "
       "--set training.global_batch=32,64 has 2"},
      {"--set parallel.dp=", "--set parallel.dp=: no values to sweep parallel.dp over"},
      {"--set parallel.dp=2,x", "cannot read \"x\""},
      {"--set parallel.dp=2 --metric nonsense", "--metric nonsense: no metric of that name"},
  };
  for (const Case& c : cases) {
    const auto r = run_lacuna("sweep " + kSmall + " " + c.args + outputs);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.args << "\n" << r.output;
    EXPECT_TRUE(empty_dir(dir)) << c.args;
  }
  // A compiled program has no fields to set.
  const auto compiled = run_lacuna("compile " + kSmall + " -o " + (dir / "p.pb"));
  ASSERT_EQ(compiled.exit_code, 0) << compiled.output;
  const auto r = run_lacuna("sweep " + (dir / "p.pb") + " --set parallel.dp=2 --csv " + (dir / "s.csv"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("lacuna sweep needs a scenario, not a compiled program"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "s.csv"));
}

TEST(CsvE2E, SimulateWritesOneRowMatchingItsJson) {
  TempDir dir("sim-csv");
  const auto r = run_lacuna("simulate " + kSmall + " --no-trace --no-svg --json " + (dir / "s.json") + " --csv " +
                            (dir / "s.csv"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("  csv    " + (dir / "s.csv")), std::string::npos) << r.output;
  const auto j = nlohmann::json::parse(read_file(dir / "s.json"));
  const std::vector<std::string> csv = lines_of(read_file(dir / "s.csv"));
  ASSERT_EQ(csv.size(), 2u);
  const std::vector<std::string> header = cells(csv[0]);
  const std::vector<std::string> row = cells(csv[1]);
  ASSERT_EQ(header.size(), row.size());
  auto column = [&](const std::string& name) {
    for (size_t i = 0; i < header.size(); ++i)
      if (header[i] == name) return row[i];
    ADD_FAILURE() << "no column " << name << " in " << csv[0];
    return std::string();
  };
  EXPECT_EQ(column("scenario"), "gpt-1.3b-8gpu");
  EXPECT_EQ(std::stod(column("iteration_s")), j["iteration_time_s"].get<double>());
  EXPECT_EQ(std::stod(column("mfu")), j["mfu"].get<double>());
  EXPECT_NEAR(std::stod(column("bubble_tp_exposed_ms")),
              j["bubble_summary"]["tp_exposed"]["median_s"].get<double>() * 1e3, 1e-9);
  EXPECT_EQ(header.back(), "busy_ms");  // no samples: no statistics

  // --samples adds them; the output path is checked like --json's.
  const auto s = run_lacuna("simulate " + kSmall + " --no-trace --no-svg --samples 2 --csv " + (dir / "k.csv"));
  ASSERT_EQ(s.exit_code, 0) << s.output;
  EXPECT_NE(read_file(dir / "k.csv")
                .find(",samples,iteration_s_mean,iteration_s_p50,iteration_s_p90,iteration_s_p99,"
                      "mfu_mean,mfu_p50,mfu_p90,mfu_p99\n"),
            std::string::npos);
  const auto same =
      run_lacuna("simulate " + kSmall + " --no-trace --no-svg --json " + (dir / "x") + " --csv " + (dir / "x"));
  EXPECT_EQ(same.exit_code, 2) << same.output;
  EXPECT_NE(same.output.find("--csv"), std::string::npos) << same.output;
}

TEST(CsvE2E, CompareWritesOneRowPerPlacement) {
  TempDir dir("cmp-csv");
  const auto r = run_lacuna("compare " + kTiny + " --no-svg --json " + (dir / "c.json") + " --csv " + (dir / "c.csv"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(read_file(dir / "c.json"));
  const std::vector<std::string> csv = lines_of(read_file(dir / "c.csv"));
  ASSERT_EQ(csv.size(), j["placements"].size() + 1);
  EXPECT_EQ(csv[0].rfind("placement,name,status,fits,rank,speedup,encoder_hidden_fraction,num_gpus,iteration_s,", 0),
            0u)
      << csv[0];
  EXPECT_NE(csv[0].find(",bubble_boundary_exposed_ms,bubble_encoder_comm_exposed_ms,"), std::string::npos) << csv[0];
  EXPECT_EQ(csv[1].rfind("MEGATRON_BASELINE,Megatron baseline,ok,true,", 0), 0u) << csv[1];
}

}  // namespace
}  // namespace lacuna::testing
