// `lacuna diff --svg` on the hand-written documents of diff_fixture.h: a
// well-formed document with both halves, outlines where the bubbles differ,
// the rank choice, determinism.
#include "sim/report/formats/diff_svg.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "sim/core/error.h"
#include "sim/core/error_testing.h"
#include "sim/report/analyses/diff_fixture.h"
#include "sim/report/formats/svg_util.h"

namespace lacuna::report {
namespace {

using diff_fixture::Json;
using ::testing::HasSubstr;

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + what.size())) ++n;
  return n;
}

struct Fixture {
  DiffInput predicted;
  DiffInput measured;
  DiffReport report;
};

// Measured: rank 0's op 3 starts 50 ns late (observed, not predicted) and
// rank 0's op 4 follows op 3 at once (predicted, not observed).
Fixture shifted() {
  Json m = diff_fixture::measured_doc();
  diff_fixture::set_times(m, 0, 0, 2, 150, 200, 300);
  diff_fixture::set_times(m, 0, 0, 3, 300, 300, 400);
  diff_fixture::set_times(m, 0, 0, 4, 400, 400, 1100);
  m["iteration_time_ns"] = 1100;
  Fixture f{parse_diff_input(diff_fixture::text(diff_fixture::predicted_doc()), "pred.json"),
            parse_diff_input(diff_fixture::text(m), "meas.json"), {}};
  f.report = diff_runs(f.predicted, f.measured);
  return f;
}

// Issue 16: an iteration time near INT64_MAX made the tick loop's `t += step`
// wrap, and `diff --svg` wrote lines for 34 s and 4 GB. The reader now
// refuses such times (ParseDiffInput.TimesThatCouldOverflowASumAreRefused);
// the axis stays a dozen ticks whatever it is given.
TEST(DiffSvg, AnAxisNearTheLargestTimeKeepsADozenTicks) {
  std::string svg;
  svg::TimeAxis axis;
  axis.left = 10;
  axis.total_ns = std::numeric_limits<int64_t>::max() - 1;
  axis.px_per_ns = 1000.0 / static_cast<double>(axis.total_ns);
  svg::grid(svg, axis, 0, 100);
  svg::time_axis(svg, axis, 120);
  EXPECT_LT(svg.size(), 20'000u);
  EXPECT_GT(count(svg, " ms</text>"), 2u);
  EXPECT_LE(count(svg, " ms</text>"), 13u);
}

TEST(DiffSvg, WellFormedWithBothHalves) {
  const Fixture f = shifted();
  const std::string svg = render_diff_svg(f.predicted, f.measured, f.report, 0);
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_EQ(count(svg, "<svg "), 1u);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  EXPECT_EQ(count(svg, "<g"), count(svg, "</g>"));
  EXPECT_EQ(count(svg, "<text"), count(svg, "</text>"));
  const size_t predicted = svg.find("id=\"predicted\"");
  const size_t measured = svg.find("id=\"measured\"");
  ASSERT_NE(predicted, std::string::npos);
  ASSERT_NE(measured, std::string::npos);
  EXPECT_LT(predicted, measured) << "predicted above measured";
  EXPECT_EQ(count(svg, "class=\"half\""), 2u);
  // Each half labels rank 0's three streams.
  EXPECT_EQ(count(svg, ">pp_send_fwd</text>"), 2u);
  EXPECT_THAT(svg, HasSubstr("tiny — rank 0 (pp 0 tp 0 dp 0): predicted 1.000 µs vs measured 1.100 µs (error -9.09 %)"));
  EXPECT_THAT(svg, HasSubstr("fill=\"url(#idle)\""));
  EXPECT_THAT(svg, HasSubstr("ms</text>")) << "time axis in ms";
}

TEST(DiffSvg, OutlinesTheMismatchedBubblesInBothHalves) {
  const Fixture f = shifted();
  ASSERT_EQ(f.report.observed_not_predicted.size(), 1u);
  ASSERT_FALSE(f.report.predicted_not_observed.empty());
  const std::string svg = render_diff_svg(f.predicted, f.measured, f.report, 0);
  // Legend entries carry no class; one outline per half and mismatch.
  EXPECT_EQ(count(svg, "class=\"bubble-not-predicted\""), 2u);
  EXPECT_EQ(count(svg, "class=\"bubble-not-observed\""), 2 * f.report.predicted_not_observed.size());
  // Rank 1 has no mismatch: drawn alone, no outline.
  const std::string rank1 = render_diff_svg(f.predicted, f.measured, f.report, 1);
  EXPECT_EQ(count(rank1, "class=\"bubble-not"), 0u);
}

TEST(DiffSvg, IsDeterministic) {
  const Fixture f = shifted();
  EXPECT_EQ(render_diff_svg(f.predicted, f.measured, f.report, 0),
            render_diff_svg(f.predicted, f.measured, f.report, 0));
  const Fixture g = shifted();
  EXPECT_EQ(render_diff_svg(f.predicted, f.measured, f.report, 0),
            render_diff_svg(g.predicted, g.measured, g.report, 0));
}

TEST(DiffSvg, ChoosesAComparedRank) {
  const Fixture f = shifted();
  EXPECT_EQ(diff_svg_rank(f.report, std::nullopt), 0);
  EXPECT_EQ(diff_svg_rank(f.report, 1), 1);
  // The error names the option as the caller spells it (the CLI's --rank).
  try {
    diff_svg_rank(f.report, 5, "--rank");
    FAIL() << "rank 5 is not compared";
  } catch (const Error& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("--rank: rank 5 is not in the timelines of both files"));
    EXPECT_THAT(std::string(e.what()), HasSubstr("choose one of 0, 1"));
  }
  const std::string plain = testing_support::formatted_error_of([&] { diff_svg_rank(f.report, 5); });
  EXPECT_THAT(plain, HasSubstr("rank: rank 5 is not"));
  EXPECT_THAT(plain, ::testing::Not(HasSubstr("--rank")));
  DiffReport none = f.report;
  none.compared_ranks.clear();
  EXPECT_THROW(diff_svg_rank(none, std::nullopt), Error);
}

}  // namespace
}  // namespace lacuna::report
