// The terminal progress line (sim/run/run_progress.h) with a fake clock, and
// the engine's progress calls (engine::ProgressSink) on a run large enough to
// make them.
#include "sim/run/run_progress.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "sim/engine/engine_test_support.h"
#include "sim/engine/pipeline_program.h"
#include "sim/engine/simulator.h"

namespace lacuna::run {
namespace {

std::string contents(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  for (int c = std::fgetc(f); c != EOF; c = std::fgetc(f)) s.push_back(static_cast<char>(c));
  return s;
}

TEST(TerminalProgress, SilentForTwoSecondsThenRedrawsAtMostFourTimesASecondAndClears) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  double now = 100.0;
  {
    TerminalProgress p(f, [&] { return now; });
    now = 101.9;
    p.on_progress(1000, 10, 100, TimeNs(5000));
    EXPECT_FALSE(p.shown());
    EXPECT_EQ(contents(f), "");
    now = 102.0;
    p.on_progress(2000, 50, 100, TimeNs(1'234'000'000));
    EXPECT_TRUE(p.shown());
    const std::string first = contents(f);
    EXPECT_EQ(first, "\r" + TerminalProgress::line(2000, 50, 100, TimeNs(1'234'000'000), 2.0));
    EXPECT_NE(first.find("50 %"), std::string::npos) << first;
    EXPECT_NE(first.find("simulated 1.234 s"), std::string::npos) << first;
    EXPECT_NE(first.find("ETA 0:02"), std::string::npos) << first;  // half done in 2 s
    now = 102.1;  // within 0.25 s: no redraw
    p.on_progress(3000, 60, 100, TimeNs(2'000'000'000));
    EXPECT_EQ(contents(f), first);
    now = 102.3;
    p.on_progress(4000, 75, 100, TimeNs(2'000'000'000));
    EXPECT_GT(contents(f).size(), first.size());
  }  // the destructor clears the line: spaces, then the cursor back at column 0
  const std::string all = contents(f);
  ASSERT_GE(all.size(), 2u);
  EXPECT_EQ(all.back(), '\r');
  std::fclose(f);
}

TEST(TerminalProgress, LineWithoutProgressYetHasNoEta) {
  const std::string l = TerminalProgress::line(0, 0, 0, TimeNs(0), 3.0);
  EXPECT_NE(l.find("0 %"), std::string::npos) << l;
  EXPECT_NE(l.find("ETA ?"), std::string::npos) << l;
}

struct Recorder final : engine::ProgressSink {
  struct Call {
    uint64_t events, ops_done, ops_total;
    TimeNs now;
  };
  std::vector<Call> calls;
  void on_progress(uint64_t events, uint64_t ops_done, uint64_t ops_total, TimeNs now) override {
    calls.push_back({events, ops_done, ops_total, now});
  }
};

TEST(ProgressSink, CalledEveryFixedNumberOfEventsWithMonotoneFigures) {
  engine::testing::PipelineSpec spec;
  spec.tp = 8;
  spec.pp = 8;
  spec.dp = 8;
  spec.microbatches = 8;
  const ir::Program p = engine::testing::make_pipeline_program(spec);
  const engine::testing::ClosedFormCost cost;
  Recorder recorder;
  const engine::SimulationResult r = engine::Simulator(p, cost, {.iterations = 5, .progress = &recorder}).run();
  ASSERT_GE(r.events, engine::kProgressEveryEvents);
  ASSERT_EQ(recorder.calls.size(), r.events / engine::kProgressEveryEvents);
  for (size_t i = 0; i < recorder.calls.size(); ++i) {
    const auto& c = recorder.calls[i];
    EXPECT_EQ(c.events, (i + 1) * engine::kProgressEveryEvents);
    EXPECT_EQ(c.ops_total, r.ops);  // every op of every stream, all iterations
    EXPECT_LE(c.ops_done, c.ops_total);
    if (i > 0) {
      EXPECT_GE(c.ops_done, recorder.calls[i - 1].ops_done);
      EXPECT_GE(c.now, recorder.calls[i - 1].now);
    }
  }
  // The same run without a sink: identical result.
  const engine::SimulationResult bare = engine::Simulator(p, cost, {.iterations = 5}).run();
  EXPECT_EQ(bare.end_time, r.end_time);
  EXPECT_EQ(bare.events, r.events);
}

}  // namespace
}  // namespace lacuna::run
