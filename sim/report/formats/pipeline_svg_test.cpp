#include "sim/report/formats/pipeline_svg.h"

#include <regex>
#include <vector>

#include <gtest/gtest.h>

#include "sim/report/observers/test_fixture.h"

namespace lacuna::report {
namespace {

// Checks that every element is closed in order (a well-formedness check,
// enough for what the writer emits: no CDATA, comments or stray '<').
bool balanced(const std::string& svg, std::string* why) {
  std::vector<std::string> open;
  size_t i = 0;
  while ((i = svg.find('<', i)) != std::string::npos) {
    const size_t close = svg.find('>', i);
    if (close == std::string::npos) return *why = "unterminated tag", false;
    const std::string tag = svg.substr(i + 1, close - i - 1);
    i = close + 1;
    if (tag.starts_with("?")) continue;
    if (tag.starts_with("/")) {
      const std::string name = tag.substr(1);
      if (open.empty() || open.back() != name) return *why = "unexpected </" + name + ">", false;
      open.pop_back();
    } else if (!tag.ends_with("/")) {
      open.push_back(tag.substr(0, tag.find_first_of(" \n")));
    }
  }
  if (!open.empty()) return *why = "unclosed <" + open.back() + ">", false;
  return true;
}

size_t count(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t i = s.find(needle); i != std::string::npos; i = s.find(needle, i + 1)) ++n;
  return n;
}

std::string render(const ir::Program& p, const std::string& spec) {
  PipelineSvg svg(p, parse_rank_spec(spec));
  testing::replay(p, {&svg});
  return svg.render();
}

TEST(PipelineSvg, IsAWellFormedStandaloneDocumentWithTitleAxisLegendAndLanes) {
  const ir::Program p = testing::two_rank_program();
  const std::string svg = render(p, "pipeline");
  std::string why;
  EXPECT_TRUE(balanced(svg, &why)) << why;
  EXPECT_TRUE(svg.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\""));
  EXPECT_TRUE(svg.ends_with("</svg>\n"));
  EXPECT_NE(svg.find("tiny &lt;two&gt; &amp; ranks — iteration 400 ns"), std::string::npos) << "escaped title";
  EXPECT_NE(svg.find("rank 0 (pp 0 tp 0 dp 0)"), std::string::npos);
  EXPECT_NE(svg.find("rank 1 (pp 1 tp 0 dp 0)"), std::string::npos);
  EXPECT_NE(svg.find("class=\"axis\""), std::string::npos);
  EXPECT_NE(svg.find(">0.00000 ms</text>"), std::string::npos) << "ticks in ms";
  EXPECT_NE(svg.find(">0.00040 ms</text>"), std::string::npos) << "tick at the end";
  for (const char* label : {"forward", "backward (input)", "backward (weight)", "recompute", "optimizer", "TP comm",
                            "PP comm", "DP comm", "compute idle (bubble)"}) {
    EXPECT_NE(svg.find(std::string(">") + label + "</text>"), std::string::npos) << label;
  }
  EXPECT_EQ(svg.find(">CP comm<"), std::string::npos) << "no CP lane without CP traffic";
  EXPECT_EQ(count(svg, "fill=\"url(#idle)\""), 3u) << "one idle background per row + legend";
  // Lane labels on both rows.
  EXPECT_EQ(count(svg, ">TP</text>"), 2u);
  EXPECT_EQ(count(svg, ">PP</text>"), 2u);
  EXPECT_EQ(count(svg, ">DP</text>"), 2u);
}

TEST(PipelineSvg, MergesConsecutiveOpsOfOneMicrobatchAndLabelsWideOnes) {
  ir::Program p = testing::two_rank_program();
  auto* compute = p.mutable_classes(0)->mutable_streams(testing::kCompute);
  for (int i = 0; i < 50; ++i) *compute->add_ops() = testing::make_compute(ir::FORWARD, 7, i, ir::ROLE_FC1);
  PipelineSvg svg(p, parse_rank_spec("0"));
  engine::RunInfo info;
  info.program = &p;
  info.simulated_ranks = {0, 1};
  svg.on_run_begin(info);
  for (int i = 0; i < 50; ++i) {  // 50 back-to-back kernels, 1 µs each
    svg.on_op_end(testing::span(p, 0, testing::kCompute, 7 + i, i * 1000, i * 1000, (i + 1) * 1000));
  }
  svg.on_run_end(TimeNs(100'000));
  const std::string out = svg.render();
  EXPECT_EQ(count(out, "fill=\"#4c78a8\""), 2u) << "one merged rect + the legend swatch";
  EXPECT_NE(out.find(">7</text>"), std::string::npos) << "microbatch label";
}

TEST(PipelineSvg, InterleavedBackwardKernelsFormOnePassColouredByTheLargerPart) {
  ir::Program p = testing::two_rank_program();
  auto* compute = p.mutable_classes(0)->mutable_streams(testing::kCompute);
  for (int i = 0; i < 20; ++i) {
    *compute->add_ops() = testing::make_compute(i % 2 ? ir::BACKWARD_WEIGHT : ir::BACKWARD_INPUT, 2, i, ir::ROLE_FC1);
  }
  PipelineSvg svg(p, parse_rank_spec("0"));
  engine::RunInfo info;
  info.program = &p;
  info.simulated_ranks = {0, 1};
  svg.on_run_begin(info);
  int64_t t = 0;
  for (int i = 0; i < 20; ++i) {  // B 3 µs, W 1 µs, alternating
    const int64_t d = i % 2 ? 1000 : 3000;
    svg.on_op_end(testing::span(p, 0, testing::kCompute, 7 + i, t, t, t + d));
    t += d;
  }
  svg.on_run_end(TimeNs(t));
  const std::string out = svg.render();
  EXPECT_EQ(count(out, "fill=\"#f58518\""), 2u) << "one backward rect + the legend swatch";
  EXPECT_EQ(count(out, "fill=\"#eeca3b\""), 1u) << "only the legend swatch";
}

TEST(PipelineSvg, HostOverheadIsDrawnAndInTheLegendOnlyWhenThereIsSome) {
  const std::string without = render(testing::two_rank_program(), "pipeline");
  EXPECT_EQ(without.find("host (launch/framework)"), std::string::npos);
  EXPECT_EQ(without.find("class=\"host\""), std::string::npos);

  ir::Program p = testing::two_rank_program();
  auto* compute = p.mutable_classes(0)->mutable_streams(testing::kCompute);
  for (int i = 0; i < 10; ++i) *compute->add_ops() = testing::make_compute(ir::FORWARD, 0, i, ir::ROLE_FC1);
  PipelineSvg svg(p, parse_rank_spec("0"));
  engine::RunInfo info;
  info.program = &p;
  info.simulated_ranks = {0, 1};
  svg.on_run_begin(info);
  // Launch-bound: each 1 µs kernel waits 2 µs for its launch; the first five
  // back to back, then one 20 µs apart (a separate span), then a kernel whose
  // host was not late (no span).
  for (int i = 0; i < 5; ++i) {
    svg.on_op_end(testing::span(p, 0, testing::kCompute, 7 + i, i * 3000, i * 3000 + 2000, i * 3000 + 2000,
                                (i + 1) * 3000));
  }
  svg.on_op_end(testing::span(p, 0, testing::kCompute, 12, 35'000, 37'000, 37'000, 38'000));
  svg.on_op_end(testing::span(p, 0, testing::kCompute, 13, 38'000, 38'000, 39'000));
  // Off the main compute stream, a late host draws nothing.
  svg.on_op_end(testing::span(p, 0, testing::kTp, 0, 0, 500, 500, 600));
  svg.on_run_end(TimeNs(40'000));
  const std::vector<TimelineRow> rows = svg.rows();
  ASSERT_EQ(rows.size(), 1u);
  ASSERT_EQ(rows[0].host.size(), 6u);
  EXPECT_EQ(rows[0].host[1].start, 3000);
  EXPECT_EQ(rows[0].host[1].end, 5000);
  const std::string out = svg.render();
  std::string why;
  EXPECT_TRUE(balanced(out, &why)) << why;
  EXPECT_NE(out.find(">host (launch/framework)</text>"), std::string::npos);
  EXPECT_EQ(count(out, "fill=\"#bcbd22\""), 2u) << "one host group + the legend swatch";
  // 40 µs over the plot: a 1 µs gap is wider than a pixel, so the five close
  // spans stay apart; 6 rects in the group.
  const size_t group = out.find("class=\"host\"");
  ASSERT_NE(group, std::string::npos);
  EXPECT_EQ(count(out.substr(group, out.find("</g>", group) - group), "<rect"), 6u);
}

TEST(PipelineSvg, IsByteIdenticalAcrossRuns) {
  const ir::Program p = testing::two_rank_program();
  EXPECT_EQ(render(p, "all"), render(p, "all"));
}

}  // namespace
}  // namespace lacuna::report
