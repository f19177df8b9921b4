// The critical-path outputs on the one-slow-rank program (straggler_fixture.h):
// the straggler sentence, the terminal and JSON sections, the path's events in
// the trace and the heat map's structure.
#include "sim/report/formats/critical_path_report.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "sim/engine/simulator.h"
#include "sim/report/formats/critical_path_trace.h"
#include "sim/report/formats/heatmap_svg.h"
#include "sim/report/observers/op_graph_recorder.h"
#include "sim/report/analyses/slack.h"
#include "sim/report/observers/straggler_fixture.h"
#include "sim/report/observers/stragglers.h"

namespace lacuna::report {
namespace {

struct Analysed {
  TimeNs end;
  CriticalPath path;
  CriticalPathReport report;
  StragglerSummary stragglers;
  std::vector<TimeNs> peer_wait;
};

Analysed analyse(const ir::Program& p) {
  engine::testing::ClosedFormCost cost;
  engine::Simulator sim(p, cost);
  OpGraphRecorder rec(OpGraphRecorder::kAlways);
  StragglerAttribution att;
  sim.add_observer(&rec);
  sim.add_observer(&att);
  Analysed r;
  r.end = sim.run().end_time;
  r.path = rec.path();
  const GraphTiming timing = time_graph(*rec.graph());
  PathInputs in;
  in.path = &rec.path();
  in.graph = rec.graph();
  in.timing = &timing;
  in.ops = rec.ops();
  in.simulated_ranks = {0, 1, 2, 3, 4, 5, 6, 7};
  in.traced_ranks = {0, 2};
  r.report = summarize_critical_path(p, in);
  r.stragglers = att.summary();
  r.peer_wait = att.peer_wait();
  return r;
}

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t i = s.find(what); i != std::string::npos; i = s.find(what, i + 1)) ++n;
  return n;
}

// Rank 2 (host 1) is 1.5× slow: it is last in its DP reduce-scatter, and
// host 1 is last in both DP groups it has a member in (holds 1000 and 500 ns
// side by side: a union of 1000 ns,
// stragglers_test.cpp), every iteration.
TEST(CriticalPathReport, StragglerSentenceNamesTheSlowHost) {
  const Analysed r = analyse(testing::slow_rank_program({}));
  EXPECT_EQ(straggler_headline(r.stragglers),
            "host 1 (ranks 2–3) was the last to arrive in 100.0 % of its dp reduce_scatters and cost 1.000 µs per "
            "iteration");
  const std::string text = format_stragglers(r.stragglers);
  EXPECT_NE(text.find("host 1 (ranks 2–3)"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 2 "), std::string::npos) << text;
  // Without a slow rank nobody straggles and there is no sentence.
  const Analysed even = analyse(testing::slow_rank_program({.scale = 1.0}));
  EXPECT_EQ(straggler_headline(even.stragglers), "");
  EXPECT_EQ(format_stragglers(even.stragglers).find("was the last"), std::string::npos);
}

TEST(CriticalPathReport, TerminalAndJsonSections) {
  const Analysed r = analyse(testing::slow_rank_program({}));
  ASSERT_EQ(r.end, TimeNs(3150));
  const std::string text = format_critical_path(r.report);
  EXPECT_NE(text.find("critical path"), std::string::npos);
  EXPECT_NE(text.find("compute gemm"), std::string::npos) << text;
  EXPECT_NE(text.find("whole graph"), std::string::npos) << text;
  const nlohmann::json j = nlohmann::json::parse(critical_path_json(r.report).dump());
  EXPECT_EQ(j["length_ns"], 3150);
  EXPECT_EQ(j["graph"], "whole");
  EXPECT_EQ(j["by_class"][0]["key"], "compute gemm");
  EXPECT_DOUBLE_EQ(j["by_class"][0]["share"].get<double>(), 3000.0 / 3150.0);
  // Every path step is [kind, rank, stream, op, start, end], contiguous in
  // time from 0 to the iteration time.
  const auto& steps = j["path"];
  ASSERT_EQ(steps.size(), r.path.steps.size());
  EXPECT_EQ(steps.front()[4], 0);
  EXPECT_EQ(steps.back()[5], 3150);
  for (size_t i = 1; i < steps.size(); ++i) EXPECT_EQ(steps[i][4], steps[i - 1][5]) << "step " << i;
  // Slack: zero for the traced slow rank's ops, positive for rank 0's first GEMM.
  for (const auto& o : j["slack"]["ops"]) {
    EXPECT_GE(o[3].get<int64_t>(), 0);
    if (o[0] == 2) {
      EXPECT_EQ(o[3], 0);
    }
  }
  const nlohmann::json s = nlohmann::json::parse(stragglers_json(r.stragglers).dump());
  EXPECT_EQ(s["hosts"][0]["host"], 1);
  EXPECT_EQ(s["hosts"][0]["label"], "host 1 (ranks 2–3)");
  EXPECT_EQ(s["straggled"], 3);
}

// The trace epilogue: one slice per step on the "critical path" process, the
// traced ranks' steps again under their own process, and a flow arrow for
// every change of rank between traced ranks; every event is valid JSON.
TEST(CriticalPathReport, TraceMarksEveryStep) {
  const ir::Program p = testing::slow_rank_program({});
  const Analysed r = analyse(p);
  std::vector<std::string> events;
  write_critical_path_events(p, r.path, {0, 2}, [&](std::string_view e) { events.emplace_back(e); });
  int on_track = 0, on_rank2 = 0, starts = 0, finishes = 0;
  for (const std::string& e : events) {
    const nlohmann::json j = nlohmann::json::parse(e);
    if (j["ph"] == "X" && j["pid"] == 9) ++on_track;
    if (j["ph"] == "X" && j["pid"] == 2) ++on_rank2;
    if (j["ph"] == "s") ++starts;
    if (j["ph"] == "f") ++finishes;
  }
  EXPECT_EQ(on_track, static_cast<int>(r.path.steps.size()));
  int steps_on_2 = 0, changes = 0;
  for (size_t i = 0; i < r.path.steps.size(); ++i) {
    steps_on_2 += r.path.steps[i].rank == 2;
    const bool traced = (r.path.steps[i].rank == 0 || r.path.steps[i].rank == 2);
    if (i > 0 && traced && r.path.steps[i].rank != r.path.steps[i - 1].rank &&
        (r.path.steps[i - 1].rank == 0 || r.path.steps[i - 1].rank == 2)) {
      ++changes;
    }
  }
  EXPECT_GT(steps_on_2, 0);
  EXPECT_EQ(on_rank2, steps_on_2);
  EXPECT_EQ(starts, changes);
  EXPECT_EQ(finishes, changes);
}

// The heat map: one cell per GPU in each panel, the slow rank darkest in the
// compute panel and lightest (no wait) in the wait panel, the path's ranks
// outlined; the same input gives the same bytes.
TEST(CriticalPathReport, HeatmapCellsColoursAndOutlines) {
  const ir::Program p = testing::slow_rank_program({});
  const Analysed r = analyse(p);
  HeatmapData d;
  d.iteration = r.end;
  for (int32_t k = 0; k < 8; ++k) {
    d.compute_ns.push_back(k == 2 ? 3000 : 2000);
    d.wait_ns.push_back(r.peer_wait[static_cast<size_t>(k)].count());
  }
  d.on_path.assign(8, 0);
  for (const PathStep& s : r.path.steps) d.on_path[static_cast<size_t>(s.rank)] = 1;
  const std::string svg = render_heatmap(p, d);
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  EXPECT_EQ(count(svg, "<title>rank "), 16);
  EXPECT_EQ(count(svg, "<title>rank 2 (node 1 gpu 0)"), 2);
  // Compute panel first: rank 2 is the maximum (dark red), the others the
  // minimum (light yellow); in the wait panel rank 2 waited 0 (light).
  const size_t first = svg.find("<title>rank 2 (node 1 gpu 0)");
  const size_t second = svg.find("<title>rank 2 (node 1 gpu 0)", first + 1);
  ASSERT_NE(second, std::string::npos);
  // The fill of the cell a <title> belongs to: between its <rect and the title.
  auto fill_of = [&](size_t title) {
    const size_t rect = svg.rfind("<rect", title);
    const size_t f = svg.find("fill=\"", rect);
    return svg.substr(f + 6, 7);
  };
  EXPECT_EQ(fill_of(first), "#800026");
  EXPECT_EQ(fill_of(svg.find("<title>rank 0 (node 0 gpu 0)")), "#ffffcc");
  EXPECT_EQ(fill_of(second), "#ffffcc");
  int path_ranks = 0;
  for (uint8_t b : d.on_path) path_ranks += b;
  const size_t outlines = svg.find("class=\"critical\"");
  ASSERT_NE(outlines, std::string::npos);
  EXPECT_EQ(count(svg, "class=\"critical\""), 2);
  EXPECT_EQ(count(svg.substr(outlines, svg.find("</g>", outlines) - outlines), "<rect"), path_ranks);
  EXPECT_EQ(render_heatmap(p, d), svg);
}

}  // namespace
}  // namespace lacuna::report
