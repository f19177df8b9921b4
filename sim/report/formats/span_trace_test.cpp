// The span trace (span_trace.h): the JSON timeline is a view of it (diff
// reads the same input from either), its bytes are deterministic, and every
// corruption of a trace is refused by name, never a crash.
#include "sim/report/formats/span_trace.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "sim/core/error.h"
#include "sim/engine/engine_test_support.h"
#include "sim/engine/pipeline_program.h"
#include "sim/engine/simulator.h"
#include "sim/ir/digest.h"
#include "sim/report/observers/bubble_accounting.h"
#include "sim/report/formats/json_report.h"
#include "sim/report/analyses/rank_spec.h"

namespace lacuna::report {
namespace {

using ::testing::HasSubstr;

struct SimulatedRun {
  ir::Program program;
  Summary summary;
};

SimulatedRun simulate_pipeline(int iterations = 1) {
  engine::testing::PipelineSpec spec;
  spec.tp = 2;
  spec.pp = 3;
  spec.dp = 2;
  spec.microbatches = 3;
  SimulatedRun run{engine::testing::make_pipeline_program(spec), {}};
  run.program.mutable_info()->set_scenario_name("pipeline");
  run.program.mutable_info()->set_num_ranks(run.program.ranks_size());
  engine::testing::ClosedFormCost cost;
  engine::Simulator sim(run.program, cost, {.iterations = iterations});
  BubbleAccounting accounting;
  TimelineRecorder timeline(run.program, parse_rank_spec("pipeline"));
  sim.add_observer(&accounting);
  sim.add_observer(&timeline);
  sim.run();
  run.summary = summarize(run.program, accounting, "closed form", false);
  run.summary.program_digest = ir::content_digest(run.program);
  run.summary.timeline = timeline.timeline();
  return run;
}

trace::Trace trace_of(const SimulatedRun& run, trace::Origin origin = trace::PREDICTION) {
  return make_span_trace(run.summary, *run.summary.timeline, origin, run.summary.program_digest);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string parse_error(const trace::Trace& t) {
  return error_of([&] { (void)parse_span_trace(span_trace_bytes(t), "run.spans"); });
}

TEST(SpanTrace, TheJsonTimelineIsAViewOfTheSameSpans) {
  const SimulatedRun run = simulate_pipeline();
  const std::string bytes = span_trace_bytes(trace_of(run));
  ASSERT_TRUE(looks_like_span_trace(bytes));
  const std::string json = summary_json(run.summary);
  ASSERT_FALSE(looks_like_span_trace(json));

  const DiffInput from_json = parse_diff_file(json, "run.json");
  const DiffInput from_trace = parse_diff_file(bytes, "run.spans");
  EXPECT_EQ(from_trace.program_digest, run.summary.program_digest);
  EXPECT_EQ(from_json.program_digest, from_trace.program_digest);
  EXPECT_EQ(from_json.scenario, from_trace.scenario);
  EXPECT_EQ(from_json.num_gpus, from_trace.num_gpus);
  EXPECT_EQ(from_json.mode, from_trace.mode);
  EXPECT_EQ(from_json.iteration_time_ns, from_trace.iteration_time_ns);
  EXPECT_EQ(from_json.classes, from_trace.classes);
  ASSERT_EQ(from_json.ranks.size(), from_trace.ranks.size());
  ASSERT_EQ(from_trace.ranks.size(), 3u);  // "pipeline": one rank per stage
  size_t ops = 0;
  for (size_t r = 0; r < from_json.ranks.size(); ++r) {
    const DiffRank& a = from_json.ranks[r];
    const DiffRank& b = from_trace.ranks[r];
    EXPECT_EQ(a.rank, b.rank);
    EXPECT_EQ(a.label, b.label);
    ASSERT_EQ(a.streams.size(), b.streams.size());
    for (size_t s = 0; s < a.streams.size(); ++s) {
      EXPECT_EQ(a.streams[s].name, b.streams[s].name);
      EXPECT_EQ(a.streams[s].kind, b.streams[s].kind);
      ASSERT_EQ(a.streams[s].ops.size(), b.streams[s].ops.size());
      for (size_t k = 0; k < a.streams[s].ops.size(); ++k) {
        const DiffOp& x = a.streams[s].ops[k];
        const DiffOp& y = b.streams[s].ops[k];
        EXPECT_EQ(std::tie(x.op, x.cls, x.phase, x.microbatch, x.module, x.ready_ns, x.start_ns, x.end_ns),
                  std::tie(y.op, y.cls, y.phase, y.microbatch, y.module, y.ready_ns, y.start_ns, y.end_ns));
        ++ops;
      }
    }
    // The traced ranks' bubbles, in ns in the trace, in s in the JSON.
    const DiffRankBubbles* jb = nullptr;
    for (const DiffRankBubbles& x : from_json.rank_bubbles) {
      if (x.rank == a.rank) jb = &x;
    }
    ASSERT_NE(jb, nullptr);
    const DiffRankBubbles& tb = from_trace.rank_bubbles[r];
    ASSERT_EQ(jb->by_category_ns.size(), tb.by_category_ns.size());
    for (size_t c = 0; c < tb.by_category_ns.size(); ++c) {
      EXPECT_EQ(jb->by_category_ns[c].first, tb.by_category_ns[c].first);
      EXPECT_NEAR(jb->by_category_ns[c].second, tb.by_category_ns[c].second, 1);
    }
  }
  EXPECT_GT(ops, 50u);
  // So diff of a run against its own trace finds nothing.
  const DiffReport d = diff_runs(from_json, from_trace);
  EXPECT_EQ(d.predicted_iteration_ns, d.measured_iteration_ns);
  EXPECT_TRUE(d.predicted_not_observed.empty());
  EXPECT_TRUE(d.observed_not_predicted.empty());
}

TEST(SpanTrace, SameRunSameBytes) {
  EXPECT_EQ(span_trace_bytes(trace_of(simulate_pipeline())), span_trace_bytes(trace_of(simulate_pipeline())));
}

TEST(SpanTrace, DiffRefusesTracesOfDifferentPrograms) {
  const SimulatedRun run = simulate_pipeline();
  trace::Trace other = trace_of(run, trace::MEASUREMENT);
  other.set_program_digest("fnv1a64:0000000000000000");
  const DiffInput a = diff_input_from_trace(trace_of(run), "pred.spans");
  const DiffInput b = diff_input_from_trace(other, "meas.spans");
  const std::string e = error_of([&] { (void)diff_runs(a, b); });
  EXPECT_THAT(e, HasSubstr("meas.spans: program_digest"));
  EXPECT_THAT(e, HasSubstr("different programs"));
  // A file without a digest (an older lacuna) falls back to name and size.
  DiffInput old = b;
  old.program_digest.clear();
  EXPECT_EQ(error_of([&] { (void)diff_runs(a, old); }), "");
}

TEST(SpanTrace, DiffComparesOneIteration) {
  const SimulatedRun run = simulate_pipeline(3);
  const trace::Trace t = parse_span_trace(span_trace_bytes(trace_of(run)), "run.spans");
  EXPECT_EQ(t.iterations(), 3);
  EXPECT_THAT(error_of([&] { (void)diff_input_from_trace(t, "run.spans"); }),
              HasSubstr("run.spans: iterations: a trace of 3 iterations"));
}

TEST(SpanTrace, EveryCorruptionIsRefusedByName) {
  const trace::Trace good = trace_of(simulate_pipeline());
  ASSERT_EQ(parse_error(good), "");
  const auto with = [&](const std::function<void(trace::Trace&)>& edit) {
    trace::Trace t = good;
    edit(t);
    return parse_error(t);
  };
  auto first_span = [](trace::Trace& t) { return t.mutable_ranks(0)->mutable_streams(0)->mutable_spans(0); };
  EXPECT_THAT(with([](trace::Trace& t) { t.set_format_version(2); }), HasSubstr("run.spans: format_version: 2"));
  EXPECT_THAT(with([](trace::Trace& t) { t.set_origin(trace::ORIGIN_UNSPECIFIED); }), HasSubstr("origin"));
  EXPECT_THAT(with([](trace::Trace& t) { t.set_num_gpus(0); }), HasSubstr("num_gpus"));
  EXPECT_THAT(with([](trace::Trace& t) { t.set_iterations(0); }), HasSubstr("iterations"));
  EXPECT_THAT(with([](trace::Trace& t) { t.set_iteration_time_ns(-1); }), HasSubstr("iteration_time_ns"));
  EXPECT_THAT(with([](trace::Trace& t) { t.mutable_ranks(1)->set_rank(t.ranks(0).rank()); }),
              HasSubstr("ranks[1].rank: rank 0 appears twice"));
  EXPECT_THAT(with([](trace::Trace& t) { t.mutable_ranks(0)->set_rank(99); }),
              HasSubstr("ranks[0].rank: rank 99 out of range"));
  EXPECT_THAT(with([](trace::Trace& t) { t.mutable_ranks(0)->mutable_streams(1)->set_stream(0); }),
              HasSubstr("ranks[0].streams[1].stream"));
  EXPECT_THAT(with([&](trace::Trace& t) { first_span(t)->set_op_class(1000); }),
              HasSubstr("ranks[0].streams[0].spans[0].op_class: 1000 is not an index"));
  EXPECT_THAT(with([&](trace::Trace& t) { first_span(t)->set_op(-1); }), HasSubstr("spans[0].op"));
  EXPECT_THAT(with([&](trace::Trace& t) { first_span(t)->set_phase(static_cast<ir::Phase>(77)); }),
              HasSubstr("unknown phase 77"));
  EXPECT_THAT(with([&](trace::Trace& t) { first_span(t)->set_iteration(1); }), HasSubstr("spans[0].iteration"));
  EXPECT_THAT(with([&](trace::Trace& t) { first_span(t)->set_start_ns(first_span(t)->end_ns() + 1); }),
              HasSubstr("ends before it starts"));
  EXPECT_THAT(with([&](trace::Trace& t) { first_span(t)->set_end_ns(int64_t{1} << 62); }),
              HasSubstr("spans[0].end_ns: 4611686018427387904 ns is not a time in [0, 10^15] ns"));
  EXPECT_THAT(with([](trace::Trace& t) { t.mutable_ranks(0)->mutable_bubbles(0)->set_ns(-5); }),
              HasSubstr("ranks[0].bubbles[0].ns"));
  EXPECT_THAT(error_of([] { (void)parse_span_trace("\x08\x01\xff", "run.spans"); }),
              HasSubstr("run.spans: neither JSON nor a span trace"));
}

// Random byte flips of a good trace: each is refused by name or parses into
// a trace that passes the checks; diff's reader never crashes on one.
TEST(SpanTrace, RandomByteFlipsAreRefusedOrChecked) {
  const std::string good = span_trace_bytes(trace_of(simulate_pipeline()));
  std::mt19937_64 rng(16);
  for (int i = 0; i < 300; ++i) {
    std::string bytes = good;
    const size_t at = rng() % bytes.size();
    bytes[at] = static_cast<char>(bytes[at] ^ static_cast<char>(1 + rng() % 255));
    try {
      (void)parse_diff_file(bytes, "flipped.spans");
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("flipped.spans")) << "flip " << i;
    }
  }
}

}  // namespace
}  // namespace lacuna::report
