// End-to-end: `lacuna compare` (and `lacuna simulate` on a multimodal
// scenario) as a user runs them, on the tiny ViT + GPT scenarios in
// tests/data/. Every placement that applies must simulate.
#include <gtest/gtest.h>

#include <cstdlib>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <nlohmann/json.hpp>

#include "tests/cli_test_util.h"

namespace lacuna::testing {
namespace {

const std::string kTiny = source_path("tests/data/tiny-vit-gpt-8gpu.pbtxt");
const std::string kPlanned = source_path("tests/data/tiny-vit-gpt-8gpu-planned.pbtxt");
const std::string kLlmOnly = source_path("scenarios/llm/gpt-1.3b-8gpu.pbtxt");

// Megatron's encoder pipeline needs GPUs beyond the LLM's and an encoder
// layout with the LLM's dp: the tiny scenarios have neither, so compare lists
// it with that reason.
bool encoder_pp_refused(const nlohmann::json& p) {
  if (p["placement"] != "MEGATRON_ENCODER_PP" || p["status"] == "ok") return false;
  const std::string error = p.value("error", "");
  return error.find("cluster.num_nodes") != std::string::npos || error.find("layout.dp") != std::string::npos;
}

// Fails the test for every placement that did not simulate (but the encoder
// pipeline refused for want of GPUs or a matching layout).
void expect_all_simulated(const nlohmann::json& j) {
  for (const auto& p : j["placements"])
    if (p["status"] != "ok" && !encoder_pp_refused(p))
      ADD_FAILURE() << p["placement"] << " failed: " << p.value("error", "");
}

nlohmann::json compare_json(const std::string& scenario, const TempDir& dir, const std::string& extra = "",
                            const std::string& name = "c.json") {
  const auto r = run_lacuna("compare " + scenario + " --out-dir " + dir.path().string() + " --json " + (dir / name) +
                            " " + extra);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return nlohmann::json::parse(read_file(dir / name));
}

TEST(CompareE2E, TinyScenarioComparesEveryPlacementSideBySide) {
  TempDir dir("cmp");
  const auto r = run_lacuna("compare " + kTiny + " --json " + (dir / "c.json") + " --svg " + (dir / "c.svg"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* s : {"lacuna compare: tiny-vit-gpt-8gpu", "Megatron baseline", "Megatron balanced", "Optimus",
                        "heterogeneous", "speedup vs Megatron baseline", "encoder hidden in bubbles", "LLM alone",
                        "peak memory (max GPU)"}) {
    EXPECT_NE(r.output.find(s), std::string::npos) << s << "\n" << r.output;
  }
  const auto j = nlohmann::json::parse(read_file(dir / "c.json"));
  EXPECT_EQ(j["scenario"], "tiny-vit-gpt-8gpu");
  EXPECT_EQ(j["mode"], "folded");
  ASSERT_EQ(j["placements"].size(), 7u);
  const std::vector<std::string> order = {"MEGATRON_BASELINE", "MEGATRON_BALANCED",   "OPTIMUS",
                                          "HETEROGENEOUS",     "HETEROGENEOUS",       "MEGATRON_ENCODER_PP",
                                          "MEGATRON_LAYER_SPLIT"};
  for (size_t i = 0; i < order.size(); ++i) EXPECT_EQ(j["placements"][i]["placement"], order[i]);
  EXPECT_EQ(j["placements"][3]["variant"], "colocated");
  EXPECT_EQ(j["placements"][4]["variant"], "non-colocated");
  EXPECT_NE(j["placements"][4]["layout"].get<std::string>().find("island of 8 GPUs"), std::string::npos);
  EXPECT_TRUE(j["placements"][4].contains("idle_share_island"));
  EXPECT_NE(r.output.find("  verdict: "), std::string::npos) << r.output;
  EXPECT_EQ(j["verdict"].get<std::string>().empty(), false);
  const double t_llm = j["llm_only"]["iteration_time_s"].get<double>();
  EXPECT_GT(t_llm, 0.0);
  if (r.output.find("Optimus planner") == std::string::npos && j["placements"][2]["status"] == "ok") {
    ADD_FAILURE() << "the Optimus planner's wall time is printed\n" << r.output;
  }
  // The workload is the same under every placement, so are its model FLOPs
  // (LLM + encoder + projector): the MFU of each placement divides the same
  // numerator.
  double model_flops = 0;
  for (const auto& p : j["placements"]) {
    if (p["status"] == "ok") model_flops = std::max(model_flops, p["model_flops_per_iteration"].get<double>());
  }
  for (const auto& p : j["placements"]) {
    if (p["status"] != "ok") continue;
    SCOPED_TRACE(p["placement"].get<std::string>());
    EXPECT_NEAR(p["model_flops_per_iteration"].get<double>(), model_flops, 1e-9 * model_flops)
        << "model FLOPs must include the encoder in every placement";
    // The non-colocated placement adds its encoder island (one 8-GPU node).
    const int gpus = p.value("variant", "") == "non-colocated" ? 16 : 8;
    EXPECT_EQ(p["num_gpus"], gpus);
    const double t = p["iteration_time_s"].get<double>();
    EXPECT_GT(t, 0.0);
    EXPECT_GT(p["mfu"].get<double>(), 0.0);
    EXPECT_LT(p["mfu"].get<double>(), 1.0);
    // TFLOP/s per GPU divides the model FLOPs (encoders included) by every GPU.
    EXPECT_NEAR(p["tflops_per_gpu"].get<double>() * 1e12 * gpus * t, p["model_flops_per_iteration"].get<double>(),
                1e-6 * p["model_flops_per_iteration"].get<double>());
    EXPECT_GT(p["encoder_compute_max_s"].get<double>(), 0.0) << "encoder compute ops carry module > 0";
    const auto& h = p["encoder_hidden_fraction"];
    ASSERT_TRUE(h.is_number()) << p.dump();
    EXPECT_GE(h.get<double>(), 0.0);
    EXPECT_LE(h.get<double>(), 1.0);
    // The definition, from the JSON's own numbers.
    const double expected =
        std::clamp(1.0 - (t - t_llm) / p["encoder_compute_max_s"].get<double>(), 0.0, 1.0);
    EXPECT_NEAR(h.get<double>(), expected, 1e-9);
    ASSERT_EQ(p["modules"].size(), 2u) << "ProgramInfo.modules must describe the LLM and the encoder "
                                          "(placement::add_multimodal_info)";
    EXPECT_EQ(p["modules"][1]["name"], "vit-tiny");
    double parts = 0;
    for (const auto& [k, v] : p["bubbles"].items()) {
      if (k != "total_s") parts += v.get<double>();
    }
    EXPECT_NEAR(parts, p["bubbles"]["total_s"].get<double>(), 1e-8) << "mean categories add up";
    EXPECT_GT(p["peak_memory_bytes"].get<double>(), 0.0);
  }
  if (j["placements"][0]["status"] == "ok") {
    EXPECT_EQ(j["placements"][0]["speedup"].get<double>(), 1.0);
  }
  if (j["placements"][2]["status"] == "ok") {
    EXPECT_TRUE(j["placements"][2].contains("optimus")) << "Optimus reports its planner's decisions";
  }

  const std::string svg = read_file(dir / "c.svg");
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_NE(svg.find("</svg>\n"), std::string::npos);
  for (const char* id : {"MEGATRON_BASELINE", "MEGATRON_BALANCED", "OPTIMUS", "HETEROGENEOUS_COLOCATED",
                         "HETEROGENEOUS_NONCOLOCATED"})
    EXPECT_NE(svg.find(std::string("id=\"placement-") + id + "\""), std::string::npos) << id;
  EXPECT_NE(svg.find("id=\"llm-only\""), std::string::npos);
  EXPECT_NE(svg.find(">encoder forward</text>"), std::string::npos) << "encoder compute drawn in its own colour";

  expect_all_simulated(j);
}

// On a 4.5 GiB GPU the Megatron baseline, Optimus and the layer split fit
// once their planners raise the recompute (the encoder pipeline has no GPUs
// of its own here); the balanced and heterogeneous placements do not even
// at full recompute of every layer: simulated, shown, not ranked, and a line
// says why (docs/compare.md).
TEST(CompareE2E, PlacementsOverHbmAreListedWithTheirReasonAndNotRanked) {
  TempDir dir("cmp-hbm");
  std::string text = read_file(kTiny);
  const std::string preset = "  preset: \"h100-sxm\"\n";
  ASSERT_NE(text.find(preset), std::string::npos);
  text.replace(text.find(preset), preset.size(), preset + "  gpu { hbm_capacity_gib: 4.5 }\n");
  const std::string small = dir / "tiny-4.5gib.pbtxt";
  {
    std::ofstream(small) << text;
  }
  const auto r = run_lacuna("compare " + small + " --network analytic --no-svg --json " + (dir / "c.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("(!) does not fit HBM, not ranked"), std::string::npos) << r.output;
  const auto j = nlohmann::json::parse(read_file(dir / "c.json"));
  std::vector<std::string> ranked, over;
  for (const auto& p : j["placements"]) {
    if (encoder_pp_refused(p)) continue;
    ASSERT_EQ(p["status"], "ok") << p.dump();
    const std::string name = p["name"].get<std::string>();
    if (p["fits"].get<bool>()) {
      ranked.push_back(p.value("id", p["placement"].get<std::string>()));
      EXPECT_LE(p["peak_memory_bytes"].get<int64_t>(), int64_t{9} << 29) << name;
      continue;
    }
    over.push_back(p.value("id", p["placement"].get<std::string>()));
    EXPECT_TRUE(p["rank"].is_null());
    EXPECT_TRUE(p["speedup"].is_null());
    const std::string reason = p["infeasible_reason"].get<std::string>();
    // The worst rank's peak (the best its planner reached), the capacity,
    // the recompute reached.
    EXPECT_NE(reason.find("peaks at "), std::string::npos) << reason;
    EXPECT_NE(reason.find("> 4.83 GB"), std::string::npos) << reason;
    EXPECT_NE(reason.find("gpt-tiny full recompute of every layer"), std::string::npos) << reason;
    EXPECT_NE(r.output.find(name), std::string::npos);
    EXPECT_NE(r.output.find(reason.substr(0, 40)), std::string::npos) << "the reason under the table\n" << r.output;
  }
  // Heterogeneous non-colocated: its LLM ranks (the island's GPUs fit).
  // Optimus: its encoder groups have communicators of their own (not the
  // LLM's world group), whose NCCL buffers put its worst rank at 5.46 GB,
  // over this tight capacity (4.77 GB while it shared the world group).
  EXPECT_EQ(over, (std::vector<std::string>{"MEGATRON_BALANCED", "OPTIMUS", "HETEROGENEOUS_COLOCATED",
                                            "HETEROGENEOUS_NONCOLOCATED"}));
  // Only those that fit are ranked, fastest first (the baseline and the
  // layer split).
  ASSERT_EQ(j["ranking"].size(), 2u);
  std::vector<std::string> ranking;
  for (const auto& k : j["ranking"]) ranking.push_back(k.get<std::string>());
  std::sort(ranked.begin(), ranked.end());
  std::vector<std::string> sorted = ranking;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, ranked);
  double previous = 0;
  for (const std::string& k : ranking)
    for (const auto& p : j["placements"])
      if (p.value("id", p["placement"].get<std::string>()) == k) {
        EXPECT_GE(p["iteration_time_s"].get<double>(), previous);
        previous = p["iteration_time_s"].get<double>();
      }
  // The baseline's recompute was raised to fit (modules record it).
  EXPECT_NE(j["placements"][0]["modules"][1]["recompute"], "none") << j["placements"][0]["modules"].dump();
}

TEST(CompareE2E, SameInputsGiveByteIdenticalJsonAndSvg) {
  TempDir a("cmp-det-a"), b("cmp-det-b");
  for (const TempDir* d : {&a, &b}) {
    const auto r = run_lacuna("compare " + kTiny + " --json " + (*d / "c.json") + " --svg " + (*d / "c.svg"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  EXPECT_EQ(read_file(a / "c.json"), read_file(b / "c.json"));
  EXPECT_EQ(read_file(a / "c.svg"), read_file(b / "c.svg"));
  EXPECT_EQ(read_file(a / "c.json").find("wall"), std::string::npos) << "no wall-clock values in the JSON";
}

// Folding is exact with the analytic network. Under the flow model a folded
// run leaves out the unsimulated ranks' own traffic (docs/network.md#folded-runs):
// it sees less contention, within 0.5 % of the full run here either way (the
// balanced placement's interleaved pipeline and the step's all-reduces share
// NVLink with other classes' transfers). Less contention is not a bound: a
// transfer that finishes earlier can reorder later ones, and the folded
// balanced placement ends 0.02 % after the full run with the fitted kernels.
TEST(CompareE2E, FullRunMatchesFold) {
  TempDir dir("cmp-full");
  for (const std::string network : {"analytic", "flow"}) {
    SCOPED_TRACE(network);
    const auto fold = compare_json(kTiny, dir, "--no-svg --network " + network, "fold.json");
    const auto full = compare_json(kTiny, dir, "--no-svg --full --network " + network, "full.json");
    EXPECT_EQ(full["mode"], "full");
    ASSERT_EQ(fold["placements"].size(), full["placements"].size());
    for (size_t i = 0; i < fold["placements"].size(); ++i) {
      EXPECT_EQ(fold["placements"][i]["status"], full["placements"][i]["status"]);
      if (encoder_pp_refused(fold["placements"][i])) continue;  // no time to compare
      const int64_t f = fold["placements"][i]["iteration_time_ns"];
      const int64_t g = full["placements"][i]["iteration_time_ns"];
      if (network == "analytic") {
        EXPECT_EQ(f, g) << fold["placements"][i]["placement"];
      } else {
        EXPECT_LE(static_cast<double>(std::abs(g - f)), 0.005 * static_cast<double>(g))
            << fold["placements"][i]["placement"];
      }
    }
    EXPECT_EQ(fold["llm_only"]["iteration_time_ns"], full["llm_only"]["iteration_time_ns"]);
  }
}

// Without encoder layouts compare derives both heterogeneous ones
// (placement::choose_heterogeneous).
TEST(CompareE2E, WithoutEncoderLayoutsHeterogeneousLayoutsAreDerived) {
  TempDir dir("cmp-planned");
  const auto j = compare_json(kPlanned, dir, "--no-svg");
  ASSERT_EQ(j["placements"].size(), 7u);
  std::set<std::string> kinds;
  for (const auto& p : j["placements"]) kinds.insert(p.value("id", p["placement"].get<std::string>()));
  EXPECT_EQ(kinds, (std::set<std::string>{"MEGATRON_BASELINE", "MEGATRON_BALANCED", "OPTIMUS",
                                          "HETEROGENEOUS_COLOCATED", "HETEROGENEOUS_NONCOLOCATED",
                                          "MEGATRON_ENCODER_PP", "MEGATRON_LAYER_SPLIT"}));
  for (size_t i = 3; i < 5; ++i)
    EXPECT_NE(j["placements"][i]["layout"].get<std::string>().find("searched"), std::string::npos)
        << j["placements"][i].dump();
  expect_all_simulated(j);
}

TEST(CompareE2E, ChosenRankAndDefaultOutputPath) {
  TempDir dir("cmp-rank");
  auto r = run_lacuna("compare " + kTiny + " --full --rank 5 --out-dir " + (dir / "out"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::string svg = read_file(dir / "out/tiny-vit-gpt-8gpu.compare.svg");
  EXPECT_NE(svg.find("placements compared at rank 5"), std::string::npos);
  EXPECT_NE(svg.find(">rank 5 (pp 1 tp 1 dp 0)</text>"), std::string::npos) << "rows are labelled with the rank";
  // Folded, rank 5 is drawn through the rank that stands for it.
  r = run_lacuna("compare " + kTiny + " --rank 5 --svg " + (dir / "fold.svg"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  svg = read_file(dir / "fold.svg");
  EXPECT_NE(svg.find("(for rank 5)</text>"), std::string::npos);
}

TEST(CompareE2E, UserErrorsExitTwoAndWriteNothing) {
  TempDir dir("cmp-err");
  // An LLM-only scenario has nothing to compare.
  auto r = run_lacuna("compare " + kLlmOnly + " --json " + (dir / "c.json") + " --out-dir " + dir.path().string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("needs a multimodal scenario"), std::string::npos) << r.output;
  // A rank no placement has.
  r = run_lacuna("compare " + kTiny + " --rank 4096 --json " + (dir / "c.json") + " --out-dir " + dir.path().string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("rank 4096 does not exist"), std::string::npos) << r.output;
  // A compiled program instead of a scenario.
  r = run_lacuna("compare " + (dir / "p.pb") + " --out-dir " + dir.path().string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("needs a scenario"), std::string::npos) << r.output;
  // An unwritable JSON path fails before any simulation.
  r = run_lacuna("compare " + kTiny + " --json " + (dir / "no/such/dir/c.json") + " --no-svg");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(r.output.find("lacuna compare:"), std::string::npos) << "no table: it failed before the runs\n" << r.output;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    ADD_FAILURE() << "unexpected output " << e.path();
  }
}

// `lacuna simulate` on a multimodal scenario runs it in its own placement
// (Optimus here) and reports modules, the planner's decisions and encoder work.
TEST(SimulateMultimodalE2E, ReportsPlacementModulesAndEncoderWork) {
  TempDir dir("mm-sim");
  const auto r = run_lacuna("simulate " + kTiny + " --json " + (dir / "s.json") + " --trace " +
                            (dir / "s.trace.json") + " --svg " + (dir / "s.svg") + " --trace-ranks all");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* s : {"placement                Optimus", "gpt-tiny (LLM)", "vit-tiny (encoder)",
                        "TP 1 · CP 1 · PP 1 · DP 8", "Optimus encoder plan", "Optimus estimate", "bubble efficiency",
                        "planner search", "encoder compute", "bubble boundary_exposed"}) {
    EXPECT_NE(r.output.find(s), std::string::npos) << s << "\n" << r.output;
  }
  const auto j = nlohmann::json::parse(read_file(dir / "s.json"));
  EXPECT_EQ(j["placement"], "OPTIMUS");
  ASSERT_EQ(j["modules"].size(), 2u);
  EXPECT_EQ(j["optimus"]["encoder_dp"], 8) << "the encoder's fixed layout is Optimus's plan";
  EXPECT_GT(j["encoder_compute_summary"]["max_s"].get<double>(), 0.0);
  EXPECT_GT(j["model_flops_per_iteration"].get<double>(), j["modules"][0]["model_flops_per_iteration"].get<double>())
      << "MFU's numerator includes the encoder";
  EXPECT_NEAR(j["tflops_per_gpu"].get<double>() * 1e12 * 8 * j["iteration_time_s"].get<double>(),
              j["model_flops_per_iteration"].get<double>(), 1e-6 * j["model_flops_per_iteration"].get<double>());

  const auto trace = nlohmann::json::parse(read_file(dir / "s.trace.json"));
  int encoder_slices = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X" || !e["args"].contains("module")) continue;
    EXPECT_EQ(e["args"]["module"], "vit-tiny");
    EXPECT_TRUE(e["name"].get<std::string>().starts_with("vit-tiny ")) << e["name"];
    encoder_slices += e["cat"].get<std::string>().starts_with("encoder_");
  }
  EXPECT_GT(encoder_slices, 0);
  EXPECT_NE(read_file(dir / "s.svg").find(">encoder forward</text>"), std::string::npos);

  // The compiled program simulates like the scenario (both via placement::compile).
  const auto c = run_lacuna("compile " + kTiny + " -o " + (dir / "p.pb"));
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_NE(c.output.find("placement Optimus: gpt-tiny (ranks 0–7), vit-tiny (ranks 0–7)"), std::string::npos)
      << c.output;
  const auto s2 = run_lacuna("simulate " + (dir / "p.pb") + " --no-trace --no-svg --json " + (dir / "p.json"));
  ASSERT_EQ(s2.exit_code, 0) << s2.output;
  const auto k = nlohmann::json::parse(read_file(dir / "p.json"));
  EXPECT_EQ(k["iteration_time_ns"], j["iteration_time_ns"]);
  EXPECT_EQ(k["modules"], j["modules"]);
}

// `lacuna compile` writes the same bytes every time (protobuf map fields are
// serialized in a fixed order), for an LLM-only and a multimodal scenario.
TEST(CompileE2E, SameScenarioGivesByteIdenticalProgram) {
  TempDir dir("compile-det");
  for (const std::string& scenario : {kLlmOnly, kTiny}) {
    for (const char* name : {"a.pb", "b.pb"}) {
      const auto r = run_lacuna("compile " + scenario + " -o " + (dir / name));
      ASSERT_EQ(r.exit_code, 0) << r.output;
    }
    EXPECT_EQ(read_file(dir / "a.pb"), read_file(dir / "b.pb")) << scenario;
  }
}

}  // namespace
}  // namespace lacuna::testing
