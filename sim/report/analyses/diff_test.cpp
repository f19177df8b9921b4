// `lacuna diff` on hand-written documents whose gaps and times are known
// (diff_fixture.h): identical runs, shifted and removed gaps, scaled times,
// rank selections, the same-program check, and every input error.
#include "sim/report/analyses/diff.h"

#include <algorithm>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>

#include "sim/core/error.h"
#include "sim/report/analyses/diff_fixture.h"
#include "sim/report/formats/diff_format.h"

namespace lacuna::report {
namespace {

using diff_fixture::Json;
using ::testing::HasSubstr;

DiffReport diff_docs(const Json& predicted, const Json& measured, const DiffOptions& options = {}) {
  return diff_runs(parse_diff_input(diff_fixture::text(predicted), "pred.json"),
                   parse_diff_input(diff_fixture::text(measured), "meas.json"), options);
}

// The message of the lacuna::Error that `f` throws ("" if none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string parse_error(const Json& doc) {
  return error_of([&] { parse_diff_input(diff_fixture::text(doc), "bad.json"); });
}

std::string diff_error(const Json& measured) {
  return error_of([&] { diff_docs(diff_fixture::predicted_doc(), measured); });
}

const ClassDiff& class_named(const DiffReport& r, const std::string& name) {
  for (const ClassDiff& c : r.classes) {
    if (c.cls == name) return c;
  }
  throw std::runtime_error("no class " + name);
}

TEST(ParseDiffInput, ReadsTheTimeline) {
  const DiffInput in = parse_diff_input(diff_fixture::text(diff_fixture::predicted_doc()), "pred.json");
  EXPECT_EQ(in.scenario, "tiny");
  EXPECT_EQ(in.iteration_time_ns, 1000);
  ASSERT_EQ(in.ranks.size(), 2u);
  EXPECT_EQ(in.ranks[0].label, "rank 0 (pp 0 tp 0 dp 0)");
  ASSERT_EQ(in.ranks[0].streams.size(), 3u);
  const DiffOp& op = in.ranks[0].streams[0].ops[3];
  EXPECT_EQ(op.op, 4);
  EXPECT_EQ(in.classes[static_cast<size_t>(op.cls)], "compute GEMM");
  EXPECT_EQ(op.phase, 2);
  EXPECT_EQ(op.microbatch, 1);
  EXPECT_EQ(op.ready_ns, 250);
  EXPECT_EQ(op.start_ns, 400);
  EXPECT_EQ(op.end_ns, 500);
  ASSERT_EQ(in.rank_bubbles.size(), 2u);
  ASSERT_EQ(in.rank_bubbles[0].by_category_ns.size(), 3u);
  EXPECT_EQ(in.rank_bubbles[0].by_category_ns[1], (std::pair<std::string, int64_t>{"pp_other", 550}));
  EXPECT_EQ(main_compute_stream(in.ranks[0]), 0);
}

TEST(DiffRuns, IdenticalFilesHaveNoErrorAndNoBubbleMismatch) {
  const DiffReport r = diff_docs(diff_fixture::predicted_doc(), diff_fixture::measured_doc());
  ASSERT_TRUE(r.iteration_error.has_value());
  EXPECT_EQ(*r.iteration_error, 0.0);
  EXPECT_EQ(r.compared_ranks, (std::vector<int32_t>{0, 1}));
  EXPECT_TRUE(r.only_predicted_ranks.empty());
  EXPECT_TRUE(r.only_measured_ranks.empty());
  ASSERT_EQ(r.classes.size(), 5u);
  for (const ClassDiff& c : r.classes) {
    ASSERT_TRUE(c.error.has_value()) << c.cls;
    EXPECT_EQ(*c.error, 0.0) << c.cls;
  }
  ASSERT_EQ(r.streams.size(), 5u);
  for (const StreamDiff& s : r.streams) EXPECT_EQ(*s.error, 0.0) << s.rank << " " << s.name;
  EXPECT_EQ(r.min_bubble_ns, 10);
  EXPECT_TRUE(r.min_bubble_default);
  // rank 0: before op 4 and the tail; rank 1: before op 0 and the tail.
  EXPECT_EQ(r.predicted_bubbles, 4);
  EXPECT_EQ(r.measured_bubbles, 4);
  EXPECT_EQ(r.matched_bubbles, 4);
  EXPECT_TRUE(r.predicted_not_observed.empty());
  EXPECT_TRUE(r.observed_not_predicted.empty());
  ASSERT_EQ(r.bubble_categories.size(), 3u);
  EXPECT_EQ(r.bubble_categories[0].category, "pp_warmup");
  EXPECT_EQ(r.bubble_categories[0].predicted_ns, 300);
  EXPECT_EQ(r.bubble_categories[1].predicted_ns, 1050);
  EXPECT_EQ(r.bubble_categories[2].measured_ns, 1350);
  for (const BubbleCategoryDiff& c : r.bubble_categories) EXPECT_EQ(*c.error, 0.0) << c.category;
}

TEST(DiffRuns, PerClassAndStreamTotals) {
  const DiffReport r = diff_docs(diff_fixture::predicted_doc(), diff_fixture::measured_doc());
  const ClassDiff& gemm = class_named(r, "compute GEMM");
  EXPECT_EQ(gemm.ops, 6);
  EXPECT_EQ(gemm.predicted_ns, 100 + 100 + 100 + 100 + 100 + 100);
  // Sorted by measured time, descending: GEMM 600, recv 300, attention 50, AR 20, send 10.
  ASSERT_EQ(r.classes.size(), 5u);
  EXPECT_EQ(r.classes[0].cls, "compute GEMM");
  EXPECT_EQ(r.classes[1].cls, "recv pp");
  EXPECT_EQ(r.classes[2].cls, "compute attention");
  EXPECT_EQ(r.classes[4].cls, "send pp");
  const StreamDiff& compute0 = r.streams[0];
  EXPECT_EQ(compute0.rank, 0);
  EXPECT_EQ(compute0.name, "compute");
  EXPECT_EQ(compute0.ops, 5);
  EXPECT_EQ(compute0.predicted_busy_ns, 450);
  EXPECT_EQ(compute0.predicted_end_ns, 600);
  EXPECT_EQ(r.streams[3].rank, 1);
}

TEST(DiffRuns, ShiftedOpIsAnObservedButNotPredictedBubble) {
  Json measured = diff_fixture::measured_doc();
  // Rank 0, op 3 starts 50 ns after op 1 ended (predicted: right after it).
  diff_fixture::set_times(measured, 0, 0, 2, 150, 200, 300);
  const DiffReport r = diff_docs(diff_fixture::predicted_doc(), measured);
  ASSERT_EQ(r.observed_not_predicted.size(), 1u);
  const BubbleMismatch& b = r.observed_not_predicted[0];
  EXPECT_EQ(b.rank, 0);
  EXPECT_EQ(b.stream, 0);
  EXPECT_EQ(b.op, 3);
  EXPECT_EQ(b.cls, "compute GEMM");
  EXPECT_EQ(b.phase, 1);
  EXPECT_EQ(b.microbatch, 1);
  EXPECT_EQ(b.predicted_gap_ns, 0);
  EXPECT_EQ(b.predicted_from_ns, 150);
  EXPECT_EQ(b.measured_gap_ns, 50);
  EXPECT_EQ(b.measured_from_ns, 150);
  // The gap before op 4 shrank from 150 to 100 ns: still a bubble in both.
  EXPECT_TRUE(r.predicted_not_observed.empty());
  EXPECT_EQ(r.matched_bubbles, 4);
  EXPECT_EQ(r.measured_bubbles, 5);
}

TEST(DiffRuns, ClosedGapIsAPredictedButNotObservedBubble) {
  Json measured = diff_fixture::measured_doc();
  diff_fixture::set_times(measured, 0, 0, 3, 250, 250, 350);    // op 4 right after op 3
  diff_fixture::set_times(measured, 0, 0, 4, 350, 350, 600);  // op 6 follows, ends at 600
  measured["iteration_time_ns"] = 600;                        // no tail on rank 0
  diff_fixture::set_times(measured, 1, 0, 1, 400, 400, 600);  // rank 1 ends at 600 (tail 0)
  const DiffReport r = diff_docs(diff_fixture::predicted_doc(), measured);
  ASSERT_EQ(r.predicted_not_observed.size(), 3u);
  // By predicted gap: rank 1 tail (500), rank 0 tail (400), rank 0 op 4 (150).
  EXPECT_EQ(r.predicted_not_observed[0].rank, 1);
  EXPECT_EQ(r.predicted_not_observed[0].op, -1);
  EXPECT_EQ(r.predicted_not_observed[0].predicted_gap_ns, 500);
  EXPECT_EQ(r.predicted_not_observed[0].measured_gap_ns, 0);
  EXPECT_EQ(r.predicted_not_observed[1].op, -1);
  EXPECT_EQ(r.predicted_not_observed[1].predicted_gap_ns, 400);
  EXPECT_EQ(r.predicted_not_observed[2].op, 4);
  EXPECT_EQ(r.predicted_not_observed[2].predicted_gap_ns, 150);
  EXPECT_EQ(r.predicted_not_observed[2].measured_gap_ns, 0);
  EXPECT_TRUE(r.observed_not_predicted.empty());
  EXPECT_EQ(r.matched_bubbles, 1) << "rank 1's 300 ns start";
  EXPECT_NEAR(*r.iteration_error, (1000.0 - 600.0) / 600.0, 1e-12);
}

TEST(DiffRuns, AGapHalvedButStillABubbleIsNoMismatch) {
  Json measured = diff_fixture::measured_doc();
  diff_fixture::set_times(measured, 0, 0, 3, 250, 310, 410);  // 150 → 60 ns, above the 10 ns threshold
  const DiffReport r = diff_docs(diff_fixture::predicted_doc(), measured);
  EXPECT_TRUE(r.predicted_not_observed.empty());
  EXPECT_EQ(r.matched_bubbles, 4);
}

TEST(DiffRuns, ScaledTimesGiveTheErrorPerClass) {
  Json measured = diff_fixture::measured_doc();
  diff_fixture::scale_times(measured, 2);
  const DiffReport r = diff_docs(diff_fixture::predicted_doc(), measured);
  EXPECT_DOUBLE_EQ(*r.iteration_error, -0.5);
  for (const ClassDiff& c : r.classes) EXPECT_DOUBLE_EQ(*c.error, -0.5) << c.cls;
  for (const StreamDiff& s : r.streams) EXPECT_DOUBLE_EQ(*s.error, -0.5) << s.name;
  for (const BubbleCategoryDiff& c : r.bubble_categories) {
    if (c.measured_ns > 0) {
      EXPECT_DOUBLE_EQ(*c.error, -0.5) << c.category;
    }
  }
  // Every gap doubled: the same bubbles in both runs.
  EXPECT_TRUE(r.predicted_not_observed.empty());
  EXPECT_TRUE(r.observed_not_predicted.empty());
  EXPECT_EQ(r.matched_bubbles, 4);
}

TEST(DiffRuns, OneClassSlowerThanPredicted) {
  Json measured = diff_fixture::measured_doc();
  diff_fixture::set_times(measured, 0, 0, 1, 100, 100, 200);  // attention 50 → 100 ns
  const DiffReport r = diff_docs(diff_fixture::predicted_doc(), measured);
  EXPECT_DOUBLE_EQ(*class_named(r, "compute attention").error, -0.5);
  EXPECT_DOUBLE_EQ(*class_named(r, "compute GEMM").error, 0.0);
  EXPECT_DOUBLE_EQ(*r.streams[0].error, (450.0 - 500.0) / 500.0);
}

TEST(DiffRuns, ThresholdOption) {
  Json measured = diff_fixture::measured_doc();
  diff_fixture::set_times(measured, 0, 0, 2, 150, 200, 300);  // a 50 ns gap
  const DiffReport r = diff_docs(diff_fixture::predicted_doc(), measured, DiffOptions{.min_bubble_ns = 200});
  EXPECT_EQ(r.min_bubble_ns, 200);
  EXPECT_FALSE(r.min_bubble_default);
  EXPECT_TRUE(r.observed_not_predicted.empty());
  EXPECT_EQ(r.predicted_bubbles, 3) << "tails 400 and 500, rank 1's 300 ns start";
}

TEST(DiffRuns, RanksInOnlyOneFile) {
  Json measured = diff_fixture::measured_doc();
  measured["timeline"]["ranks"].erase(1);
  Json predicted = diff_fixture::predicted_doc();
  Json extra = predicted["timeline"]["ranks"][1];
  extra["rank"] = 7;
  measured["timeline"]["ranks"].push_back(extra);
  const DiffReport r = diff_docs(predicted, measured);
  EXPECT_EQ(r.compared_ranks, (std::vector<int32_t>{0}));
  EXPECT_EQ(r.only_predicted_ranks, (std::vector<int32_t>{1}));
  EXPECT_EQ(r.only_measured_ranks, (std::vector<int32_t>{7}));
  EXPECT_EQ(r.streams.size(), 3u);
  EXPECT_EQ(r.bubble_categories[1].predicted_ns, 550) << "rank 0 only";
}

TEST(DiffRuns, PredictedHostOverheadAgainstAMeasurementThatCannotSeeIt) {
  // The prediction splits 100 ns of rank 0's idle into host_overhead; the
  // measurement has issued = ready (0 ns of it), or, from an older lacuna, no
  // key at all: either way the row compares 100 ns with 0 (no error ratio).
  Json predicted = diff_fixture::predicted_doc();
  predicted["ranks"][0]["bubble_s"] =
      Json::parse(R"({"pp_warmup":0.0,"pp_other":4.5e-7,"host_overhead":1e-7,"total":5.5e-7})");
  for (const bool has_key : {true, false}) {
    SCOPED_TRACE(has_key);
    Json measured = diff_fixture::measured_doc();
    if (has_key) measured["ranks"][0]["bubble_s"]["host_overhead"] = 0.0;
    const DiffReport r = diff_docs(predicted, measured);
    ASSERT_EQ(r.bubble_categories.size(), 4u);
    const BubbleCategoryDiff& host = r.bubble_categories[2];
    EXPECT_EQ(host.category, "host_overhead") << "in the predicted file's order";
    EXPECT_EQ(host.predicted_ns, 100);
    EXPECT_EQ(host.measured_ns, 0);
    EXPECT_FALSE(host.error.has_value());
    EXPECT_EQ(r.bubble_categories[1].predicted_ns, 450 + 500);
  }
}

TEST(DiffRuns, RankWithoutBubbleEntryIsListed) {
  Json measured = diff_fixture::measured_doc();
  measured["ranks"].erase(1);
  const DiffReport r = diff_docs(diff_fixture::predicted_doc(), measured);
  EXPECT_EQ(r.bubble_ranks_missing, (std::vector<int32_t>{1}));
  EXPECT_EQ(r.bubble_categories[1].predicted_ns, 550);
}

TEST(DiffRuns, RejectsADifferentProgram) {
  {
    Json m = diff_fixture::measured_doc();
    m["scenario"] = "other";
    const std::string e = diff_error(m);
    EXPECT_THAT(e, HasSubstr("meas.json"));
    EXPECT_THAT(e, HasSubstr("scenario"));
    EXPECT_THAT(e, HasSubstr("other"));
  }
  {
    Json m = diff_fixture::measured_doc();
    m["num_gpus"] = 4;
    EXPECT_THAT(diff_error(m), HasSubstr("num_gpus"));
  }
  {
    Json m = diff_fixture::measured_doc();
    m["timeline"]["ranks"][0]["streams"].erase(2);
    const std::string e = diff_error(m);
    EXPECT_THAT(e, HasSubstr("meas.json"));
    EXPECT_THAT(e, HasSubstr("pred.json"));
    EXPECT_THAT(e, HasSubstr("rank 0 has 2 streams"));
  }
  {
    Json m = diff_fixture::measured_doc();
    m["timeline"]["ranks"][1]["streams"][1]["name"] = "pp_recv_bwd";
    EXPECT_THAT(diff_error(m), HasSubstr("rank 1 stream 1"));
  }
  {
    Json m = diff_fixture::measured_doc();
    diff_fixture::op_at(m, 0, 0, 2)[0] = 2;  // op index 3 → 2
    const std::string e = diff_error(m);
    EXPECT_THAT(e, HasSubstr("timeline.ranks[0].streams[0].ops[2]"));
    EXPECT_THAT(e, HasSubstr("rank 0 stream 0 (compute)"));
    EXPECT_THAT(e, HasSubstr("op 2"));
  }
  {
    Json m = diff_fixture::measured_doc();
    diff_fixture::op_at(m, 1, 0, 1)[1] = 1;  // GEMM → attention
    const std::string e = diff_error(m);
    EXPECT_THAT(e, HasSubstr("rank 1 stream 0 (compute)"));
    EXPECT_THAT(e, HasSubstr("compute attention"));
  }
  {
    Json m = diff_fixture::measured_doc();
    m["timeline"]["ranks"][0]["streams"][1]["ops"].push_back(Json::array({2, 2, 1, 0, 0, 130, 130, 140}));
    EXPECT_THAT(diff_error(m), HasSubstr("rank 0 stream 1 (tp) has 2 ops here and 1 there"));
  }
  {
    // Classes listed in another order are still the same program.
    Json m = diff_fixture::measured_doc();
    Json& classes = m["timeline"]["classes"];
    std::swap(classes[0], classes[1]);
    for (Json& r : m["timeline"]["ranks"]) {
      for (Json& s : r["streams"]) {
        for (Json& op : s["ops"]) {
          const int c = op[1].get<int>();
          op[1] = c == 0 ? 1 : c == 1 ? 0 : c;
        }
      }
    }
    EXPECT_EQ(diff_error(m), "");
  }
}

// Issue 16: a time near INT64_MAX overflowed diff's sums (found by UBSan)
// and made `diff --svg` run for 34 s. Every time is bounded by 10^15 ns.
TEST(ParseDiffInput, TimesThatCouldOverflowASumAreRefused) {
  const Json good = diff_fixture::predicted_doc();
  {
    Json d = good;
    d["iteration_time_ns"] = std::numeric_limits<int64_t>::max() - 1;
    EXPECT_THAT(parse_error(d), HasSubstr("iteration_time_ns: 9223372036854775806 ns is above 10^15 ns (11.6 days)"));
  }
  {
    Json d = good;
    diff_fixture::set_times(d, 0, 0, 1, 100, 100, int64_t{1} << 60);
    EXPECT_THAT(parse_error(d), HasSubstr("timeline.ranks[0].streams[0].ops[1]: a time above 10^15 ns"));
  }
  {
    Json d = good;
    d["ranks"][0]["bubble_s"]["pp_warmup"] = 1e12;
    EXPECT_THAT(parse_error(d), HasSubstr("ranks[0].bubble_s.pp_warmup: 1000000000000 s is not a bubble time in [0, 10^6] s"));
  }
}

TEST(ParseDiffInput, ErrorsNameTheFileAndTheKey) {
  EXPECT_THAT(error_of([] { parse_diff_input("{\"scenario\": ", "bad.json"); }), HasSubstr("bad.json: not valid JSON"));
  EXPECT_THAT(error_of([] { parse_diff_input("[1, 2]", "bad.json"); }), HasSubstr("bad.json: expected a JSON object"));
  const Json good = diff_fixture::predicted_doc();
  for (const char* key : {"scenario", "mode", "num_gpus", "iteration_time_ns", "ranks"}) {
    Json d = good;
    d.erase(key);
    EXPECT_THAT(parse_error(d), HasSubstr(std::string("bad.json: ") + key + ": missing key")) << key;
  }
  {
    Json d = good;
    d.erase("timeline");
    const std::string e = parse_error(d);
    EXPECT_THAT(e, HasSubstr("bad.json: timeline: "));
    EXPECT_THAT(e, HasSubstr("older lacuna"));
  }
  {
    Json d = good;
    d["iteration_time_ns"] = 1.5;
    EXPECT_THAT(parse_error(d), HasSubstr("iteration_time_ns: expected an integer"));
  }
  {
    Json d = good;
    d["timeline"].erase("classes");
    EXPECT_THAT(parse_error(d), HasSubstr("bad.json: timeline.classes: missing key"));
  }
  {
    Json d = good;
    d["timeline"]["ranks"][1]["streams"][0].erase("kind");
    EXPECT_THAT(parse_error(d), HasSubstr("timeline.ranks[1].streams[0].kind: missing key"));
  }
  {
    Json d = good;
    diff_fixture::op_at(d, 0, 1, 0).erase(7);
    EXPECT_THAT(parse_error(d), HasSubstr("timeline.ranks[0].streams[1].ops[0]: expected [op, class"));
  }
  {
    Json d = good;
    diff_fixture::op_at(d, 0, 0, 0)[1] = 9;
    EXPECT_THAT(parse_error(d), HasSubstr("timeline.ranks[0].streams[0].ops[0][1]: class 9 is not an index"));
  }
  {
    Json d = good;
    diff_fixture::op_at(d, 0, 0, 0)[6] = "x";
    EXPECT_THAT(parse_error(d), HasSubstr("timeline.ranks[0].streams[0].ops[0][6]: expected an integer"));
  }
  {
    Json d = good;
    diff_fixture::set_times(d, 0, 0, 0, 0, 50, 40);
    EXPECT_THAT(parse_error(d), HasSubstr("ends before it starts"));
  }
  {
    Json d = good;
    d["timeline"]["ranks"][1]["rank"] = 0;
    EXPECT_THAT(parse_error(d), HasSubstr("timeline.ranks[1].rank: rank 0 appears twice"));
  }
  {
    Json d = good;
    d["ranks"][0]["bubble_s"]["pp_other"] = "a lot";
    EXPECT_THAT(parse_error(d), HasSubstr("ranks[0].bubble_s.pp_other: expected a number"));
  }
  {
    Json d = good;
    d["num_gpus"] = 18446744073709551615ULL;
    EXPECT_THAT(parse_error(d), HasSubstr("num_gpus: integer out of range"));
  }
  EXPECT_THAT(error_of([] { load_diff_input("/nonexistent/lacuna/diff.json"); }),
              HasSubstr("/nonexistent/lacuna/diff.json: timeline JSON or span trace not found"));
}

TEST(FormatDiff, PrintsEverySection) {
  Json measured = diff_fixture::measured_doc();
  diff_fixture::set_times(measured, 0, 0, 2, 150, 200, 300);
  const std::string text = format_diff(diff_docs(diff_fixture::predicted_doc(), measured));
  EXPECT_THAT(text, HasSubstr("lacuna diff: tiny"));
  EXPECT_THAT(text, HasSubstr("predicted 1.000 µs · measured 1.000 µs · error +0.00 %"));
  EXPECT_THAT(text, HasSubstr("compute GEMM"));
  EXPECT_THAT(text, HasSubstr("rank 0 pp_send_fwd"));
  EXPECT_THAT(text, HasSubstr("gaps ≥ 10 ns, 1 % of the predicted iteration"));
  EXPECT_THAT(text, HasSubstr("predicted but not observed: none"));
  EXPECT_THAT(text, HasSubstr("observed but not predicted: 1\n"));
  EXPECT_THAT(text, HasSubstr("pp_warmup"));
}

TEST(FormatDiff, TopLimitsTheBubbleLists) {
  Json measured = diff_fixture::measured_doc();
  diff_fixture::set_times(measured, 0, 0, 1, 100, 120, 150);
  diff_fixture::set_times(measured, 0, 0, 2, 150, 200, 300);
  const std::string text = format_diff(diff_docs(diff_fixture::predicted_doc(), measured), 1);
  EXPECT_THAT(text, HasSubstr("observed but not predicted: 2 (the 1 largest shown)"));
  EXPECT_THAT(text, HasSubstr("... and 1 more"));
}

TEST(FormatDiff, SignedPercent) {
  EXPECT_EQ(format_error_percent(0.0504), "+5.04 %");
  EXPECT_EQ(format_error_percent(-0.5), "-50.00 %");
  EXPECT_EQ(format_error_percent(std::nullopt), "—");
}

TEST(DiffJson, IsDeterministicAndComplete) {
  Json measured = diff_fixture::measured_doc();
  diff_fixture::set_times(measured, 0, 0, 2, 150, 200, 300);
  const DiffReport r = diff_docs(diff_fixture::predicted_doc(), measured);
  const std::string a = diff_json(r);
  EXPECT_EQ(a, diff_json(diff_docs(diff_fixture::predicted_doc(), measured)));
  const nlohmann::json j = nlohmann::json::parse(a);
  EXPECT_EQ(j["scenario"], "tiny");
  EXPECT_EQ(j["iteration_time"]["predicted_ns"], 1000);
  EXPECT_EQ(j["iteration_time"]["error"], 0.0);
  EXPECT_EQ(j["ranks"]["compared"], nlohmann::json::array({0, 1}));
  EXPECT_EQ(j["op_classes"][0]["class"], "compute GEMM");
  EXPECT_EQ(j["streams"].size(), 5u);
  EXPECT_EQ(j["bubbles"]["min_bubble_ns"], 10);
  ASSERT_EQ(j["bubbles"]["observed_not_predicted"].size(), 1u);
  EXPECT_EQ(j["bubbles"]["observed_not_predicted"][0]["op"], 3);
  EXPECT_EQ(j["bubbles"]["observed_not_predicted"][0]["measured_gap_ns"], 50);
  EXPECT_EQ(j["bubble_categories"]["categories"][0]["predicted_ns"], 300);
  // One top-level key per line.
  EXPECT_EQ(std::count(a.begin(), a.end(), '\n'), static_cast<long>(j.size()) + 2);
}

}  // namespace
}  // namespace lacuna::report
