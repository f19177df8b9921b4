#include "sim/sweep/sweep_outputs.h"

#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/core/error.h"
#include "sim/report/formats/csv.h"
#include "sim/sweep/line_plot_svg.h"

namespace lacuna::sweep {
namespace {

report::RunMetrics metrics(double mfu, int64_t iteration_ns, bool fits = true) {
  report::RunMetrics m;
  m.num_gpus = 8;
  m.iteration_time_ns = iteration_ns;
  m.tokens_per_s = 375422.5;
  m.tflops_per_gpu = 426.3;
  m.mfu = mfu;
  m.hfu = mfu;
  m.peak_memory_bytes = 21'340'000'000;
  m.memory_capacity_bytes = 85'899'345'920;
  m.over_capacity_ranks = fits ? 0 : 4;
  m.bubble_median_ns[static_cast<size_t>(report::Bubble::kPpWarmup)] = 16'024'000;
  m.bubble_median_ns[static_cast<size_t>(report::Bubble::kTpExposed)] = 3'500'000;
  m.bubble_total_median_ns = 19'524'000;
  m.busy_median_ns = iteration_ns - 19'524'000;
  return m;
}

SweepResult result(bool zip = false) {
  SweepSettings s;
  s.scenario = "scenarios/llm/x.pbtxt";
  Grid g = zip ? make_grid({"cluster.num_nodes=1,2", "training.global_batch=32,64"}, true)
               : make_grid({"parallel.tp=1,2", "schedule.kind=GPIPE,\"a, <b>\""}, false);
  std::vector<report::RunMetrics> points;
  const double mfu[] = {0.40, 0.41, 0.42, 0.43};
  for (size_t p = 0; p < g.size(); ++p) {
    points.push_back(metrics(mfu[p], 200'000'000 - static_cast<int64_t>(p) * 1'000'000, p != 1));
  }
  return SweepResult{"x", std::move(g), s, std::move(points)};
}

// Every element opened is closed, in order (no XML parser in the build).
bool well_formed(const std::string& svg) {
  std::vector<std::string> open;
  const std::regex tag("<(/?)([a-zA-Z]+)[^>]*?(/?)>");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), tag); it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    if (m[0].str().rfind("<?", 0) == 0) continue;
    if (m[1] == "/") {
      if (open.empty() || open.back() != m[2]) return false;
      open.pop_back();
    } else if (m[3] != "/") {
      open.push_back(m[2]);
    }
  }
  return open.empty();
}

TEST(SweepOutputsTest, CsvEscapesFieldsAndPrintsNumbersShortest) {
  EXPECT_EQ(report::csv::field("plain"), "plain");
  EXPECT_EQ(report::csv::field("a,b"), "\"a,b\"");
  EXPECT_EQ(report::csv::field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(report::csv::field("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(report::csv::field(" padded"), "\" padded\"");
  EXPECT_EQ(report::csv::row({"a", "b,c", ""}), "a,\"b,c\",\n");
  EXPECT_EQ(report::csv::number(8), "8");
  EXPECT_EQ(report::csv::number(0.4311), "0.4311");
  EXPECT_EQ(report::csv::number(16.024), "16.024");
  EXPECT_EQ(report::csv::number(1e-7), "1e-07");
  EXPECT_EQ(report::csv::number(std::nan("")), "");
}

// A point's record carries every number exactly (another process parses it).
TEST(SweepOutputsTest, MetricsRecordRoundTripsExactly) {
  report::RunMetrics m = metrics(0.1 + 0.2, 174'566'078);
  m.tokens_per_s = 1.0 / 3.0;
  m.multimodal = true;
  m.bubble_median_ns[9] = 123;
  m.samples = 4;
  m.iteration_s_samples = {0.17456607800000001, 0.1, 0.2, 0.3};
  m.mfu_samples = {1e-300, 0.43107432245142939, 0.5, 0.6};
  const report::RunMetrics back = report::metrics_from_record(report::metrics_record(m));
  EXPECT_EQ(report::metrics_record(back), report::metrics_record(m));
  EXPECT_EQ(back.mfu, m.mfu);
  EXPECT_EQ(back.tokens_per_s, m.tokens_per_s);
  EXPECT_EQ(back.mfu_samples.mean, 1e-300);
  EXPECT_EQ(back.bubble_median_ns, m.bubble_median_ns);
  EXPECT_TRUE(back.multimodal);
  EXPECT_THROW(report::metrics_from_record("{\"num_gpus\":8}"), InternalError);
}

TEST(SweepOutputsTest, CsvHasAColumnPerFieldAndMetric) {
  const std::string csv = sweep_csv(result());
  const std::string header = csv.substr(0, csv.find('\n'));
  EXPECT_EQ(header.rfind("point,parallel.tp,schedule.kind,num_gpus,iteration_s,tokens_per_s,tflops_per_gpu,mfu,hfu,"
                         "peak_memory_gb,hbm_capacity_gb,over_capacity_ranks,bubble_pp_warmup_ms,",
                         0),
            0u)
      << header;
  EXPECT_NE(header.find(",bubble_host_overhead_ms,bubble_total_ms,busy_ms"), std::string::npos) << header;
  EXPECT_EQ(header.find("boundary"), std::string::npos);  // an LLM-only sweep
  EXPECT_EQ(header.find("samples"), std::string::npos);
  // Point 2: tp 1, the quoted value (a comma and brackets inside), escaped.
  EXPECT_NE(csv.find("\n2,1,\"\"\"a, <b>\"\"\",8,0.199,375422.5,426.3,0.41,0.41,21.34,85.89934592,4,16.024,"),
            std::string::npos)
      << csv;
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 5);
}

TEST(SweepOutputsTest, JsonHoldsSettingsAndOnePointPerLine) {
  const std::string text = sweep_json(result(true));
  const nlohmann::json j = nlohmann::json::parse(text);
  EXPECT_EQ(j["settings"]["zip"], true);
  EXPECT_EQ(j["settings"]["points"], 2);
  EXPECT_EQ(j["settings"]["fields"][0]["field"], "cluster.num_nodes");
  EXPECT_EQ(j["settings"]["fields"][1]["values"][1], 64);
  ASSERT_EQ(j["points"].size(), 2u);
  EXPECT_EQ(j["points"][1]["point"], 2);
  EXPECT_EQ(j["points"][1]["fields"]["training.global_batch"], 64);
  EXPECT_EQ(j["points"][1]["fits"], false);
  EXPECT_EQ(j["points"][0]["metrics"]["mfu"].get<double>(), 0.4);
  EXPECT_EQ(j["points"][0]["metrics"]["num_gpus"], 8);
  EXPECT_EQ(j["points"][0]["metrics"]["iteration_s"].get<double>(), 0.2);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 10);
}

TEST(SweepOutputsTest, TableMarksOverHbmAndNamesTheBestPoint) {
  const std::string table = sweep_table(result());
  EXPECT_NE(table.find("| # | parallel.tp | schedule.kind | iteration (s) |"), std::string::npos) << table;
  EXPECT_NE(table.find("| pp_warmup (ms) | tp_exposed (ms) | bubbles total (ms) |"), std::string::npos) << table;
  EXPECT_EQ(table.find("dp_exposed (ms)"), std::string::npos) << table;  // zero everywhere
  EXPECT_NE(table.find("| 21.34 ! |"), std::string::npos) << table;
  EXPECT_NE(table.find("best MFU  point 4 (parallel.tp=2, schedule.kind=\"a, <b>\"): 43.00 %"), std::string::npos)
      << table;
}

// A precision sweep (BF16, FP8): the FP8 point's MFU is on the FP8 peak,
// half the BF16 one, so the points are ranked on the BF16 peak, and every
// output carries mfu_bf16_peak (docs/fp8.md#mfu).
TEST(SweepOutputsTest, Fp8PointsAreRankedOnTheBf16Peak) {
  SweepSettings s;
  s.scenario = "scenarios/llm/x.pbtxt";
  Grid g = make_grid({"training.precision=BF16,FP8"}, false);
  report::RunMetrics bf16 = metrics(0.45, 200'000'000);
  bf16.mfu_bf16_peak = 0.45;
  report::RunMetrics fp8 = metrics(0.30, 150'000'000);  // faster, lower MFU on its own (FP8) peak
  fp8.fp8 = true;
  fp8.mfu_bf16_peak = 0.60;
  const SweepResult r{"x", std::move(g), s, {bf16, fp8}};
  const std::string table = sweep_table(r);
  EXPECT_NE(table.find("| MFU | HFU | MFU on BF16 peak | peak memory (GB) |"), std::string::npos) << table;
  EXPECT_NE(table.find("best MFU  point 2 (training.precision=FP8): 60.00 % on the BF16 peak"), std::string::npos)
      << table;
  const std::string csv = sweep_csv(r);
  EXPECT_NE(csv.find("mfu,hfu,mfu_bf16_peak,peak_memory_gb,"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",0.45,0.45,0.45,21.34,"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",0.3,0.3,0.6,21.34,"), std::string::npos) << csv;
  const report::RunMetrics back = report::metrics_from_record(report::metrics_record(fp8));
  EXPECT_TRUE(back.fp8);
  EXPECT_EQ(back.mfu_bf16_peak, 0.60);
  EXPECT_EQ(report::metrics_record(back), report::metrics_record(fp8));
  // Without an FP8 point nothing changes.
  EXPECT_EQ(sweep_csv(result()).find("mfu_bf16_peak"), std::string::npos);
}

TEST(SweepOutputsTest, MetricNamesAreChecked) {
  EXPECT_NO_THROW(check_metric_names({"mfu", "bubble_pp_other_ms", "bubble_boundary_exposed_ms"}, false));
  EXPECT_NO_THROW(check_metric_names({"iteration_s_p99"}, true));
  try {
    check_metric_names({"iteration_s_p99"}, false);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("`metric iteration_s_p99`: this statistic needs `samples K`"),
              std::string::npos);
  }
  EXPECT_THROW(check_metric_names({"mfu%"}, false), Error);
}

TEST(SweepOutputsTest, SvgIsWellFormedWithALinePerCombination) {
  const std::string svg = sweep_svg(result(), {"mfu", "iteration_s"});
  EXPECT_TRUE(well_formed(svg)) << svg;
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  // Two panels × two series (schedule.kind's values), the label escaped.
  size_t lines = 0;
  for (size_t at = svg.find("<polyline"); at != std::string::npos; at = svg.find("<polyline", at + 1)) ++lines;
  EXPECT_EQ(lines, 4u);
  EXPECT_NE(svg.find("schedule.kind=&quot;a, &lt;b&gt;&quot;"), std::string::npos);
  EXPECT_EQ(svg.find("<b>"), std::string::npos);
  EXPECT_TRUE(well_formed(sweep_svg(result(true), {"tokens_per_s"})));
  // Every name check_metric_names accepts has its values: the MoE and FP8
  // ones too (0 in a dense BF16 sweep), not empty panels.
  const std::string extra = sweep_svg(result(), {"bubble_ep_exposed_ms", "mfu_bf16_peak"});
  size_t extra_lines = 0;
  for (size_t at = extra.find("<polyline"); at != std::string::npos; at = extra.find("<polyline", at + 1)) ++extra_lines;
  EXPECT_EQ(extra_lines, 4u);
  // Under --zip a field held fixed is not the x axis.
  SweepResult fixed{
      "x", make_grid({"parallel.pp=8", "cluster.num_nodes=1,2"}, true), {}, {metrics(0.4, 1), metrics(0.5, 1)}};
  EXPECT_EQ(plot_axis(fixed.grid), 1u);
  const std::string zipped = sweep_svg(fixed, {"mfu"});
  EXPECT_TRUE(well_formed(zipped));
  EXPECT_NE(zipped.find(">cluster.num_nodes</text>"), std::string::npos);
}

TEST(LinePlotTest, NumericAxisIsLogarithmicOverAWideRange) {
  EXPECT_TRUE(log_scale({256, 1024, 16384}));
  EXPECT_FALSE(log_scale({1, 2, 4}));
  EXPECT_FALSE(log_scale({0, 100}));
  EXPECT_EQ(parse_number(" 12.5"), 12.5);
  EXPECT_FALSE(parse_number("0x10"));
  EXPECT_FALSE(parse_number("GPIPE"));
  EXPECT_FALSE(parse_number("inf"));
}

TEST(LinePlotTest, NiceTicksCoverTheRange) {
  const Ticks t = nice_ticks(0.412, 0.468);
  EXPECT_LE(t.low, 0.412);
  EXPECT_GE(t.high, 0.468);
  EXPECT_DOUBLE_EQ(t.step, 0.02);
  const Ticks flat = nice_ticks(3, 3);
  EXPECT_LT(flat.low, 3);
  EXPECT_GT(flat.high, 3);
}

TEST(LinePlotTest, MismatchedSeriesIsAnInternalError) {
  LinePlot plot;
  plot.x_text = {"a", "b"};
  plot.panels.push_back({"y", {{"s", {1.0}}}});
  EXPECT_THROW(render_line_plot(plot), InternalError);
}

}  // namespace
}  // namespace lacuna::sweep
