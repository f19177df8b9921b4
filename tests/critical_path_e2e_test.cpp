// End-to-end: `lacuna simulate --critical-path --sensitivity --heatmap` on a
// shipped scenario (docs/critical-path.md).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/cli_test_util.h"

namespace lacuna::testing {
namespace {

const std::string kSmall = source_path("scenarios/llm/gpt-1.3b-8gpu.pbtxt");

// The path's length is the iteration time, its steps cover [0, T] back to
// back, slack is never negative, the straggler and sensitivity sections are
// there, and a faster op class never makes the re-simulated iteration longer
// nor gains more than the path's estimate (plus rounding: 1 ns per op).
TEST(CriticalPathE2E, PathSensitivityHeatmapAndTrace) {
  TempDir dir("crit");
  const auto r = run_lacuna("simulate " + kSmall + " --critical-path --sensitivity --trace-ranks all --json " +
                            (dir / "s.json") + " --trace " + (dir / "s.trace.json") + " --no-svg --heatmap " +
                            (dir / "h.svg"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("critical path"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("re-simulated"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("stragglers"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("heatmap " + (dir / "h.svg")), std::string::npos) << r.output;

  const auto j = nlohmann::json::parse(read_file(dir / "s.json"));
  const auto& c = j["critical_path"];
  const double t = j["iteration_time_s"].get<double>();
  EXPECT_NEAR(c["length_s"].get<double>(), t, 1e-12);
  EXPECT_EQ(c["graph"], "whole");
  const auto& steps = c["path"];
  ASSERT_FALSE(steps.empty());
  EXPECT_EQ(steps.front()[4].get<int64_t>(), 0);
  EXPECT_EQ(steps.back()[5].get<int64_t>(), c["length_ns"].get<int64_t>());
  for (size_t i = 1; i < steps.size(); ++i) EXPECT_EQ(steps[i][4], steps[i - 1][5]) << "step " << i;
  double shares = 0;
  for (const auto& s : c["by_category"]) shares += s["share"].get<double>();
  EXPECT_NEAR(shares, 1.0, 1e-9);
  int64_t zero = 0;
  for (const auto& o : c["slack"]["ops"]) {
    EXPECT_GE(o[3].get<int64_t>(), 0);
    zero += o[3].get<int64_t>() == 0;
  }
  EXPECT_GT(zero, 0) << "the path's ops have zero slack";
  const auto& classes = c["sensitivity"]["classes"];
  ASSERT_FALSE(classes.empty());
  int resimulated = 0;
  for (const auto& s : classes) {
    if (!s["resimulated"].get<bool>()) continue;
    ++resimulated;
    const double saved = s["resimulated_saved_s"].get<double>();
    EXPECT_GE(saved, 0.0) << s.dump();
    EXPECT_LT(s["resimulated_iteration_s"].get<double>(), t) << "a class on the path 10 % faster gains";
  }
  EXPECT_EQ(resimulated, std::min<int>(3, static_cast<int>(classes.size())));
  EXPECT_TRUE(j.contains("stragglers"));

  const auto trace = nlohmann::json::parse(read_file(dir / "s.trace.json"));
  int marked = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e.value("cat", "") == "critical_path" && e["ph"] == "X" && e["pid"] == 9) ++marked;
  }
  EXPECT_EQ(marked, static_cast<int>(steps.size()));

  const std::string svg = read_file(dir / "h.svg");
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  size_t cells = 0;
  for (size_t i = svg.find("<title>rank "); i != std::string::npos; i = svg.find("<title>rank ", i + 1)) ++cells;
  EXPECT_EQ(cells, 16u);  // 8 GPUs, two panels
}

// Same inputs, same bytes; a failed run leaves no heat map.
TEST(CriticalPathE2E, DeterministicAndNoPartialFiles) {
  TempDir dir("crit-det");
  const std::string args = " --critical-path --no-svg --json ";
  for (const char* n : {"a", "b"}) {
    const std::string s(n);
    const auto r = run_lacuna("simulate " + kSmall + args + (dir / (s + ".json")) + " --trace " +
                              (dir / (s + ".trace.json")) + " --heatmap " + (dir / (s + ".svg")));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  EXPECT_EQ(read_file(dir / "a.json"), read_file(dir / "b.json"));
  EXPECT_EQ(read_file(dir / "a.trace.json"), read_file(dir / "b.trace.json"));
  EXPECT_EQ(read_file(dir / "a.svg"), read_file(dir / "b.svg"));

  // --strict-memory on a GPU too small rejects the run (exit 4): no heat map,
  // and no temporary file left behind.
  std::string text = read_file(kSmall);
  const std::string nodes = "  num_nodes: 1\n";
  ASSERT_NE(text.find(nodes), std::string::npos);
  text.replace(text.find(nodes), nodes.size(), nodes + "  gpu { hbm_capacity_gib: 10 }\n");
  TempDir over_dir("crit-over");
  const std::string over = over_dir / "small-10gib.pbtxt";
  {
    std::ofstream(over) << text;
  }
  const auto bad = run_lacuna("simulate " + over + " --no-trace --no-svg --strict-memory --critical-path --heatmap " +
                              (over_dir / "x.svg"));
  EXPECT_EQ(bad.exit_code, 4) << bad.output;
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(over_dir.path())) ++files;
  EXPECT_EQ(files, 1u) << "only the scenario";
  const auto missing = run_lacuna("simulate " + kSmall + " --no-trace --no-svg --heatmap " + (dir / "no/such/dir/h.svg"));
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.output.find("no/such/dir/h.svg"), std::string::npos) << missing.output;
}

}  // namespace
}  // namespace lacuna::testing
