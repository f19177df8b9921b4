// The module-aware reports on a hand-built multimodal program
// (multimodal_fixture.h): bubble categories for boundary and encoder
// communication, encoder compute, the terminal module lines and Optimus block,
// JSON keys, trace names and the SVG's encoder colours. LLM-only programs keep
// their reports unchanged (checked against the two-rank fixture).
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sim/report/observers/bubble_accounting.h"
#include "sim/report/analyses/comm_kind.h"
#include "sim/report/formats/json_report.h"
#include "sim/report/formats/multimodal_fixture.h"
#include "sim/report/formats/pipeline_svg.h"
#include "sim/report/analyses/summary.h"
#include "sim/report/formats/terminal_report.h"
#include "sim/report/formats/trace_writer.h"

namespace lacuna::report {
namespace {

namespace fs = std::filesystem;
using testing::kCompute;

size_t count(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t i = s.find(needle); i != std::string::npos; i = s.find(needle, i + 1)) ++n;
  return n;
}

Summary multimodal_summary() {
  static const ir::Program p = testing::multimodal_program();
  BubbleAccounting acc;
  testing::replay_multimodal(p, {&acc});
  return summarize(p, acc, "test cost model", true);
}

Summary llm_summary() {
  static const ir::Program p = testing::two_rank_program();
  BubbleAccounting acc;
  testing::replay(p, {&acc});
  return summarize(p, acc, "test cost model", false);
}

TEST(CommKind, EncoderAndBoundaryGroupsAndStreams) {
  const ir::Program p = testing::multimodal_program();
  const ir::RankClass& cls = p.classes(0);
  EXPECT_EQ(comm_kind(p, cls.streams(testing::kBoundary), cls.streams(testing::kBoundary).ops(0)), CommKind::kBoundary);
  EXPECT_EQ(comm_kind(p, cls.streams(testing::kEncComm), cls.streams(testing::kEncComm).ops(0)), CommKind::kEncoder);
  EXPECT_EQ(comm_kind_of_stream(ir::BOUNDARY), CommKind::kBoundary);
  EXPECT_EQ(comm_kind_of_stream(ir::ENCODER_COMM), CommKind::kEncoder);
  // A collective on an ENCODER_TP / BOUNDARY_GROUP slot, whatever its stream.
  ir::Program q = p;
  q.mutable_group_slots(2)->set_kind(ir::BOUNDARY_GROUP);
  EXPECT_EQ(comm_kind(q, cls.streams(kCompute), cls.streams(testing::kEncComm).ops(0)), CommKind::kBoundary);
  q.mutable_group_slots(2)->set_kind(ir::ENCODER_DP);
  EXPECT_EQ(comm_kind(q, cls.streams(kCompute), cls.streams(testing::kEncComm).ops(0)), CommKind::kEncoder);
  // Unknown stream and group kinds: a collective still counts as (DP)
  // communication, a send as PP; nothing throws.
  const ir::Stream& odd = cls.streams(testing::kOdd);
  EXPECT_EQ(comm_kind(p, odd, odd.ops(0)), CommKind::kDp);
  EXPECT_EQ(comm_kind(p, odd, odd.ops(2)), CommKind::kPp);
  EXPECT_EQ(comm_kind(p, odd, odd.ops(1)), CommKind::kNone);
}

TEST(BubbleAccounting, BoundaryEncoderCommAndEncoderComputeOfTheScriptedRun) {
  const ir::Program p = testing::multimodal_program();
  BubbleAccounting acc;
  testing::replay_multimodal(p, {&acc});
  ASSERT_EQ(acc.ranks().size(), 1u);
  const RankAccount& r = acc.ranks()[0];
  EXPECT_EQ(r.busy, TimeNs(190));
  EXPECT_EQ(r.bubble(Bubble::kBoundaryExposed), TimeNs(30));
  EXPECT_EQ(r.bubble(Bubble::kEncoderCommExposed), TimeNs(60));
  EXPECT_EQ(r.bubble(Bubble::kDpExposed), TimeNs(30)) << "unknown kinds fall back to DP, never crash";
  EXPECT_EQ(r.bubble(Bubble::kPpOther), TimeNs(20));
  EXPECT_EQ(r.bubble(Bubble::kPpCooldown), TimeNs(20));
  EXPECT_EQ(r.bubble(Bubble::kPpWarmup), TimeNs(0));
  EXPECT_EQ(r.idle() + r.busy, TimeNs(350)) << "idle + busy = T exactly";
  EXPECT_EQ(r.encoder_compute, TimeNs(130)) << "module > 0 on every compute stream (50 + 40 + 40)";
  EXPECT_EQ(r.busy_by_phase[ir::FORWARD], TimeNs(150));
}

TEST(BubbleAccounting, LlmOnlyProgramHasNoEncoderTime) {
  const ir::Program p = testing::two_rank_program();
  BubbleAccounting acc;
  testing::replay(p, {&acc});
  for (const RankAccount& r : acc.ranks()) {
    EXPECT_EQ(r.encoder_compute, TimeNs(0));
    EXPECT_EQ(r.bubble(Bubble::kBoundaryExposed), TimeNs(0));
    EXPECT_EQ(r.bubble(Bubble::kEncoderCommExposed), TimeNs(0));
  }
}

TEST(Summary, MultimodalStatsAndMfuOverAllRanks) {
  const Summary s = multimodal_summary();
  EXPECT_TRUE(s.multimodal());
  EXPECT_FALSE(llm_summary().multimodal());
  EXPECT_EQ(s.encoder_compute.max, 130);
  EXPECT_EQ(s.encoder_compute.median, 130);
  // Model FLOPs (8e6, encoders included by the placement) over T · all ranks
  // of the program (2), not the simulated ones (1): 8e6 / (350 ns · 2).
  EXPECT_EQ(s.num_gpus, 2);
  EXPECT_DOUBLE_EQ(s.tflops_per_gpu, 8e6 / (350e-9 * 2) / 1e12);
}

TEST(TerminalReport, ShowsPlacementModulesOptimusAndEncoderRows) {
  const std::string out = format_summary(multimodal_summary(), RunStats{});
  EXPECT_NE(out.find("  placement                Optimus\n"), std::string::npos) << out;
  EXPECT_NE(out.find("gpt-tiny (LLM)"), std::string::npos) << out;
  EXPECT_NE(out.find("vit-22b (encoder)"), std::string::npos) << out;
  EXPECT_NE(out.find("TP 1 · CP 1 · PP 1 · DP 2"), std::string::npos) << out;
  EXPECT_NE(out.find("0–1 (2)"), std::string::npos) << out;
  EXPECT_NE(out.find("22.000 G"), std::string::npos) << "encoder parameters\n" << out;
  EXPECT_NE(out.find("2.000 M FLOP"), std::string::npos) << "encoder model FLOPs\n" << out;
  EXPECT_NE(out.find("frozen"), std::string::npos) << out;
  EXPECT_NE(out.find("TP 1 · PP 1 · DP 2; m = 2 encoder pipelines per LLM pipeline"), std::string::npos) << out;
  EXPECT_NE(out.find("3 + 5 LLM microbatches"), std::string::npos) << out;
  EXPECT_NE(out.find("LLM only 300 ns → estimated 340 ns (simulated 350 ns)"), std::string::npos) << out;
  EXPECT_NE(out.find("coarse 25.00 % · fine 75.00 %"), std::string::npos) << out;
  EXPECT_NE(out.find("12 plans evaluated, 4 pruned by memory; 70 splits evaluated"), std::string::npos) << out;
  EXPECT_NE(out.find("    encoder compute "), std::string::npos) << out;
  EXPECT_NE(out.find("bubble boundary_exposed"), std::string::npos) << out;
  EXPECT_NE(out.find("bubble encoder_comm_exposed"), std::string::npos) << out;
}

TEST(TerminalReport, UniformMicrobatchSplitIsSummarised) {
  Summary s = multimodal_summary();
  s.info.mutable_optimus()->clear_microbatch_split();
  for (int i = 0; i < 3; ++i) s.info.mutable_optimus()->add_microbatch_split(2);
  const std::string out = format_summary(s, RunStats{});
  EXPECT_NE(out.find("2 LLM microbatches for each of the 3 encoder pipelines"), std::string::npos) << out;
  s.info.clear_optimus();
  EXPECT_EQ(format_summary(s, RunStats{}).find("Optimus encoder plan"), std::string::npos)
      << "no Optimus block without OptimusInfo";
}

TEST(TerminalReport, LlmOnlyOutputHasNoMultimodalRows) {
  const std::string out = format_summary(llm_summary(), RunStats{});
  for (const char* absent : {"placement", "modules", "Optimus", "encoder", "boundary"}) {
    EXPECT_EQ(out.find(absent), std::string::npos) << absent << "\n" << out;
  }
}

TEST(JsonReport, MultimodalKeysWithUnits) {
  const auto j = nlohmann::json::parse(summary_json(multimodal_summary()));
  EXPECT_EQ(j["placement"], "OPTIMUS");
  ASSERT_EQ(j["modules"].size(), 2u);
  EXPECT_EQ(j["modules"][1]["name"], "vit-22b");
  EXPECT_EQ(j["modules"][1]["is_encoder"], true);
  EXPECT_EQ(j["modules"][1]["parameters"], 22'000'000'000);
  EXPECT_EQ(j["modules"][1]["frozen"], true);
  EXPECT_EQ(j["optimus"]["microbatch_split"], nlohmann::json({3, 5}));
  EXPECT_DOUBLE_EQ(j["optimus"]["estimated_iteration_s"].get<double>(), 340e-9);
  EXPECT_EQ(j["optimus"]["plans_pruned_by_memory"], 4);
  EXPECT_DOUBLE_EQ(j["encoder_compute_summary"]["max_s"].get<double>(), 130e-9);
  EXPECT_DOUBLE_EQ(j["bubble_summary"]["boundary_exposed"]["max_s"].get<double>(), 30e-9);
  EXPECT_DOUBLE_EQ(j["bubble_summary"]["encoder_comm_exposed"]["max_s"].get<double>(), 60e-9);
  const auto& r = j["ranks"][0];
  EXPECT_DOUBLE_EQ(r["encoder_compute_s"].get<double>(), 130e-9);
  double parts = 0;
  for (const auto& [k, v] : r["bubble_s"].items()) {
    if (k != "total") parts += v.get<double>();
  }
  EXPECT_NEAR(parts, r["bubble_s"]["total"].get<double>(), 1e-15);
  EXPECT_EQ(r["bubble_s"].size(), 11u) << "ten categories + total";
}

TEST(JsonReport, LlmOnlyKeysUnchanged) {
  const auto j = nlohmann::json::parse(summary_json(llm_summary()));
  for (const char* absent : {"placement", "modules", "optimus", "encoder_compute_summary"}) {
    EXPECT_FALSE(j.contains(absent)) << absent;
  }
  EXPECT_EQ(j["bubble_summary"].size(), 9u) << "the eight LLM categories + total";
  EXPECT_TRUE(j["bubble_summary"].contains("host_overhead")) << "host overhead is an LLM category";
  EXPECT_FALSE(j["bubble_summary"].contains("boundary_exposed"));
  EXPECT_FALSE(j["ranks"][0].contains("encoder_compute_s"));
  EXPECT_EQ(j["ranks"][0]["bubble_s"].size(), 9u);
}

TEST(TraceWriter, EncoderOpsCarryTheModuleNameCategoryAndColour) {
  const ir::Program p = testing::multimodal_program();
  EXPECT_EQ(op_name(p, 0, p.classes(0).streams(kCompute).ops(8)), "vit-22b F mb2 L3 fc1");
  EXPECT_EQ(op_name(p, 0, p.classes(0).streams(testing::kEncComm).ops(0)), "vit-22b AR enc_tp");
  EXPECT_EQ(op_name(p, 0, p.classes(0).streams(kCompute).ops(1)), "F mb0 L0 qkv") << "LLM ops unchanged";
  ir::Program unnamed = p;
  unnamed.mutable_info()->clear_modules();
  EXPECT_EQ(op_name(unnamed, 0, p.classes(0).streams(kCompute).ops(8)), "module 1 F mb2 L3 fc1");

  const fs::path path = fs::path(::testing::TempDir()) / "lacuna_mm_trace.json";
  fs::remove(path);
  {
    TraceWriter w(p, path.string(), parse_rank_spec("all"));
    testing::replay_multimodal(p, {&w});
    w.commit();
  }
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  const auto j = nlohmann::json::parse(ss.str());
  int encoder_slices = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const std::string name = e["name"];
    if (name.starts_with("vit-22b F") || name.starts_with("vit-22b B")) {
      ++encoder_slices;
      EXPECT_TRUE(e["cat"] == "encoder_forward" || e["cat"] == "encoder_backward_input") << e.dump();
      EXPECT_EQ(e["cname"], "olive");
      EXPECT_EQ(e["args"]["module"], "vit-22b");
    } else if (name == "F mb0 L0 qkv") {
      EXPECT_EQ(e["cat"], "forward");
      EXPECT_FALSE(e.contains("cname"));
      EXPECT_FALSE(e["args"].contains("module"));
    }
  }
  EXPECT_EQ(encoder_slices, 3) << "two on the main compute stream, one on the second";
}

TEST(PipelineSvg, EncoderComputeHasItsOwnColoursAndLanesWithLegend) {
  const ir::Program p = testing::multimodal_program();
  PipelineSvg svg(p, parse_rank_spec("0"));
  testing::replay_multimodal(p, {&svg});
  const std::string out = svg.render();
  EXPECT_EQ(count(out, "fill=\"#e377c2\""), 2u) << "encoder forward rect + legend";
  EXPECT_EQ(count(out, "fill=\"#5e3c99\""), 2u) << "encoder backward rect + legend";
  for (const char* label : {"encoder forward", "encoder backward", "boundary comm", "encoder comm"}) {
    EXPECT_NE(out.find(std::string(">") + label + "</text>"), std::string::npos) << label;
  }
  EXPECT_NE(out.find(">BND</text>"), std::string::npos);
  EXPECT_NE(out.find(">ENC</text>"), std::string::npos);
  EXPECT_NE(out.find("Optimus placement"), std::string::npos) << "subtitle names the placement";
  // The LLM's forward keeps its colour: one rect + legend.
  EXPECT_EQ(count(out, "fill=\"#4c78a8\""), 2u);
}

TEST(PipelineSvg, LlmOnlyPictureHasNoEncoderEntries) {
  const ir::Program p = testing::two_rank_program();
  PipelineSvg svg(p, parse_rank_spec("all"));
  testing::replay(p, {&svg});
  const std::string out = svg.render();
  for (const char* absent : {"encoder", "boundary", ">BND<", ">ENC<", "placement", "row-end"}) {
    EXPECT_EQ(out.find(absent), std::string::npos) << absent;
  }
}

TEST(TimelineSvg, RowsOfDifferentLengthsNotesAndIds) {
  TimelineDocument doc;
  doc.title = "t";
  doc.subtitle = "s";
  doc.end_ns = 1000;
  doc.mark_row_ends = true;
  TimelineRow a;
  a.id = "placement-OPTIMUS";
  a.label = "Optimus";
  a.sublabel = "rank 0 (pp 0 tp 0 dp 0)";
  a.end_ns = 500;
  a.compute.push_back({0, 200, 0, 0, ir::FORWARD, 1});
  a.compute.push_back({200, 400, 0, 0, ir::FORWARD, 0});
  TimelineRow b;
  b.id = "placement-HETEROGENEOUS";
  b.label = "heterogeneous";
  b.note = "not simulated: not applicable";
  doc.rows = {a, b};
  const std::string out = render_timeline_svg(doc);
  EXPECT_NE(out.find("id=\"placement-OPTIMUS\""), std::string::npos);
  EXPECT_NE(out.find("id=\"placement-HETEROGENEOUS\""), std::string::npos);
  EXPECT_NE(out.find(">not simulated: not applicable</text>"), std::string::npos);
  EXPECT_NE(out.find(">rank 0 (pp 0 tp 0 dp 0)</text>"), std::string::npos);
  EXPECT_EQ(count(out, "class=\"row-end\""), 1u) << "rows with a timeline only";
  // The idle background stops at the row's own end: 500 of 1000 ns = 700 px.
  EXPECT_NE(out.find("width=\"700.00\" height=\"26\" fill=\"url(#idle)\""), std::string::npos);
  EXPECT_NE(out.find(">500 ns</text>"), std::string::npos) << "end label";
  EXPECT_EQ(out, render_timeline_svg(doc)) << "deterministic";
}

}  // namespace
}  // namespace lacuna::report
