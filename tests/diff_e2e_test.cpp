// End-to-end: `lacuna diff` on the JSON that `lacuna simulate` writes (the
// tiny CPU MLLM scenario under the analytic and the flow network stand in for
// a prediction and a measurement), on span traces (--spans) of a prediction
// and a CPU measurement, `execute --replay-from`, and the exit codes on bad
// input.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/cli_test_util.h"

namespace lacuna::testing {
namespace {

const std::string kScenario = source_path("scenarios/cpu/tiny-mllm-cpu-8rank.pbtxt");

std::string simulate_json(const TempDir& dir, const std::string& name, const std::string& extra) {
  const auto r = run_lacuna("simulate " + kScenario + " --no-trace --no-svg --json " + (dir / name) + " " + extra);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return dir / name;
}

TEST(DiffE2E, SameRunHasNoErrorAndDifferentNetworksDiffer) {
  TempDir dir("diff");
  const std::string flow = simulate_json(dir, "flow.json", "");
  const std::string analytic = simulate_json(dir, "analytic.json", "--network analytic");

  const auto same = run_lacuna("diff " + flow + " " + flow + " --json " + (dir / "same.json"));
  ASSERT_EQ(same.exit_code, 0) << same.output;
  const auto j = nlohmann::json::parse(read_file(dir / "same.json"));
  EXPECT_EQ(j["iteration_time"]["error"], 0.0);
  EXPECT_FALSE(j["ranks"]["compared"].empty());
  for (const auto& c : j["op_classes"]) EXPECT_EQ(c["error"], 0.0) << c["class"];
  EXPECT_TRUE(j["bubbles"]["predicted_not_observed"].empty());
  EXPECT_TRUE(j["bubbles"]["observed_not_predicted"].empty());
  EXPECT_EQ(j["bubbles"]["matched"], j["bubbles"]["predicted"]);

  const auto r = run_lacuna("diff " + analytic + " " + flow + " --svg " + (dir / "d.svg") + " --json " +
                            (dir / "d.json") + " --top 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* s : {"lacuna diff: tiny-mllm-cpu-8rank", "iteration time", "op class", "compute gemm",
                        "stream busy time", "compute-stream bubbles", "predicted but not observed",
                        "observed but not predicted", "bubble time (sum over", "pp_warmup"}) {
    EXPECT_NE(r.output.find(s), std::string::npos) << s << "\n" << r.output;
  }
  const std::string svg = read_file(dir / "d.svg");
  EXPECT_NE(svg.find("id=\"predicted\""), std::string::npos);
  EXPECT_NE(svg.find("id=\"measured\""), std::string::npos);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  // Deterministic.
  const auto again = run_lacuna("diff " + analytic + " " + flow + " --svg " + (dir / "d2.svg") + " --json " +
                                (dir / "d2.json") + " --top 3");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(read_file(dir / "d2.svg"), svg);
  EXPECT_EQ(read_file(dir / "d2.json"), read_file(dir / "d.json"));
}

// Issue 16: one format for spans. A prediction and a measurement saved as
// span traces diff exactly as their JSON does; the saved prediction replays
// without simulating again; runs of different programs are told apart by
// their digest.
TEST(DiffE2E, SpanTracesDiffAsTheirJsonAndASavedPredictionReplays) {
  TempDir dir("spans");
  const std::string two = source_path("scenarios/cpu/tiny-mllm-cpu-2rank.pbtxt");
  auto r = run_lacuna("simulate " + two + " --no-trace --no-svg --json " + (dir / "p.json") + " --spans " +
                      (dir / "p.pb"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("spans  " + (dir / "p.pb") + "  (2 ranks)"), std::string::npos) << r.output;
  r = run_lacuna("execute " + two + " --no-trace --no-svg --json " + (dir / "m.json") + " --spans " + (dir / "m.pb"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto digest = [&](const std::string& f) {
    return nlohmann::json::parse(read_file(dir / f))["program_digest"].get<std::string>();
  };
  EXPECT_EQ(digest("p.json"), digest("m.json"));
  EXPECT_EQ(digest("p.json").rfind("fnv1a64:", 0), 0u);

  ASSERT_EQ(run_lacuna("diff " + (dir / "p.json") + " " + (dir / "m.json") + " --json " + (dir / "dj.json")).exit_code, 0);
  ASSERT_EQ(run_lacuna("diff " + (dir / "p.pb") + " " + (dir / "m.pb") + " --json " + (dir / "dp.json")).exit_code, 0);
  std::string from_spans = read_file(dir / "dp.json");
  for (size_t at = 0; (at = from_spans.find(".pb", at)) != std::string::npos;) from_spans.replace(at, 3, ".json");
  EXPECT_EQ(from_spans, read_file(dir / "dj.json"));

  r = run_lacuna("execute " + two + " --no-trace --no-svg --ranks 0 --replay-from " + (dir / "p.pb"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("executed: 1 of 2 ranks (replay:"), std::string::npos) << r.output;

  r = run_lacuna("execute " + two + " --no-trace --no-svg --ranks 0 --replay-from " + (dir / "m.pb"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("m.pb: origin: a measurement, not a prediction"), std::string::npos) << r.output;
  r = run_lacuna("execute " + two + " --no-trace --no-svg --ranks 0 --replay-from " + (dir / "p.json"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--replay-from reads a span trace"), std::string::npos) << r.output;

  // Another program (8 ranks): refused by digest, by diff and by replay.
  r = run_lacuna("simulate " + kScenario + " --no-trace --no-svg --spans " + (dir / "p8.pb") + " --trace-ranks all");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_lacuna("diff " + (dir / "p8.pb") + " " + (dir / "m.pb"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("m.pb: program_digest:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("different programs"), std::string::npos) << r.output;
  r = run_lacuna("execute " + two + " --no-trace --no-svg --ranks 0 --replay-from " + (dir / "p8.pb"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("p8.pb: program_digest: a prediction of program"), std::string::npos) << r.output;
}

TEST(DiffE2E, BadInputIsExitTwoWithAMessage) {
  TempDir dir("diffbad");
  const std::string flow = simulate_json(dir, "flow.json", "");
  nlohmann::ordered_json doc = nlohmann::ordered_json::parse(read_file(flow));
  doc.erase("timeline");
  std::ofstream(dir / "old.json") << doc.dump();
  std::ofstream(dir / "broken.json") << "{\"scenario\": ";

  auto r = run_lacuna("diff " + flow + " " + (dir / "old.json"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("old.json: timeline: no per-op timeline"), std::string::npos) << r.output;

  r = run_lacuna("diff " + (dir / "broken.json") + " " + flow);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("broken.json: not valid JSON"), std::string::npos) << r.output;

  r = run_lacuna("diff " + flow + " " + (dir / "missing.json"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("missing.json: timeline JSON or span trace not found"), std::string::npos) << r.output;

  doc = nlohmann::ordered_json::parse(read_file(flow));
  doc["scenario"] = "another";
  std::ofstream(dir / "other.json") << doc.dump();
  r = run_lacuna("diff " + flow + " " + (dir / "other.json"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("other.json: scenario:"), std::string::npos) << r.output;

  r = run_lacuna("diff " + flow + " " + flow + " --svg " + (dir / "x.svg") + " --rank 12345");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--rank: rank 12345"), std::string::npos) << r.output;

  // An unwritable output fails and leaves no other output behind.
  r = run_lacuna("diff " + flow + " " + flow + " --svg " + (dir / "y.svg") + " --json " +
                 (dir / "no/such/dir/d.json"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "y.svg"));

  r = run_lacuna("diff " + flow + " " + flow + " --min-bubble-us -3");
  EXPECT_EQ(r.exit_code, 2) << r.output;
}

}  // namespace
}  // namespace lacuna::testing
