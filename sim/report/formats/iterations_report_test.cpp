// Reports of a run of several iterations (docs/metrics.md#iterations): the
// per-iteration times, the steady-state mean, per-rank figures per iteration
// over the whole run, and the multi-iteration forms of the timeline, trace
// and JSON. One iteration keeps today's form (tested by the JSON key set).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "sim/cost/cost_model.h"
#include "sim/engine/simulator.h"
#include "sim/report/observers/bubble_accounting.h"
#include "sim/report/analyses/diff.h"
#include "sim/report/formats/json_report.h"
#include "sim/report/analyses/summary.h"
#include "sim/report/observers/timeline.h"
#include "sim/report/formats/trace_writer.h"
#include "sim/schedule/synthetic.h"

namespace lacuna::report {
namespace {

class FreeCost : public cost::CostModel {
 public:
  std::string_view name() const override { return "free"; }
  TimeNs compute(const ir::Compute&) const override { return TimeNs(1); }
  TimeNs collective(ir::CollectiveKind, int64_t, const cost::GroupShape&) const override { return TimeNs(1); }
  TimeNs p2p(int64_t, bool) const override { return TimeNs::zero(); }
};

// 1F1B, p = 4, m = 8, F/B/W = 10/15/5 µs: one iteration is 330 µs.
ir::Program one_f_one_b() {
  schedule::SyntheticPipeline s;
  s.kind = scenario::ONE_F_ONE_B;
  s.shape = {.pp = 4, .virtual_stages = 1, .microbatches = 8};
  s.per_stage = {{10_us, 15_us, 5_us}};
  ir::Program p = schedule::build_synthetic_program(s);
  p.mutable_info()->set_peak_flops_per_gpu(1e12);
  p.mutable_info()->set_model_flops_per_iteration(1e9);
  return p;
}

Summary run_summary(const ir::Program& p, int32_t iterations, engine::SimulationResult* out = nullptr) {
  FreeCost cost;
  engine::Simulator sim(p, cost, {.iterations = iterations});
  BubbleAccounting acc;
  sim.add_observer(&acc);
  const engine::SimulationResult r = sim.run();
  if (out != nullptr) *out = r;
  EXPECT_EQ(acc.iteration_ends(), r.iteration_ends) << "the accounting sees every op";
  return summarize(p, acc, "free", false);
}

TEST(IterationsReport, SteadyStateMeanAndPerIterationFigures) {
  const ir::Program p = one_f_one_b();
  const Summary one = run_summary(p, 1);
  engine::SimulationResult r;
  const Summary three = run_summary(p, 3, &r);
  EXPECT_EQ(one.iteration_time, 330_us);
  EXPECT_EQ(three.iterations, 3);
  EXPECT_EQ(three.iteration_times, (std::vector<TimeNs>{330_us, 330_us, 330_us}));
  EXPECT_EQ(three.run_time, 990_us);
  EXPECT_EQ(three.iteration_time, 330_us);
  EXPECT_EQ(three.rank_window, 330_us);
  EXPECT_DOUBLE_EQ(three.mfu, one.mfu);
  ASSERT_EQ(three.ranks.size(), one.ranks.size());
  for (size_t i = 0; i < one.ranks.size(); ++i) {
    const RankAccount& a = one.ranks[i];
    const RankAccount& b = three.ranks[i];
    SCOPED_TRACE(a.rank);
    EXPECT_EQ(b.busy, a.busy);
    EXPECT_EQ(b.idle(), a.idle());
    EXPECT_EQ(b.busy + b.idle(), three.rank_window);
    EXPECT_EQ(b.bubble(Bubble::kPpOther), a.bubble(Bubble::kPpOther));
    // The drain of one iteration and the fill of the next are one wait:
    // warm-up of the next, so only the run's last drain is cool-down.
    // Per-iteration means are rounded to the ns.
    EXPECT_NEAR((b.bubble(Bubble::kPpWarmup) + b.bubble(Bubble::kPpCooldown)).count(),
                (a.bubble(Bubble::kPpWarmup) + a.bubble(Bubble::kPpCooldown)).count(), 1);
    EXPECT_EQ(b.bubble(Bubble::kPpCooldown).count(), (a.bubble(Bubble::kPpCooldown).count() + 1) / 3);
  }
}

TEST(IterationsReport, JsonAddsIterationsOnlyForSeveral) {
  const ir::Program p = one_f_one_b();
  const auto one = nlohmann::ordered_json::parse(summary_json(run_summary(p, 1)));
  EXPECT_FALSE(one.contains("iterations"));
  const auto three = nlohmann::ordered_json::parse(summary_json(run_summary(p, 3)));
  ASSERT_TRUE(three.contains("iterations"));
  const auto& it = three["iterations"];
  EXPECT_EQ(it["count"], 3);
  EXPECT_EQ(it["run_time_ns"], 990000);
  EXPECT_EQ(it["times_ns"], nlohmann::ordered_json::parse("[330000,330000,330000]"));
  EXPECT_EQ(three["iteration_time_ns"], 330000);
  // Keys keep their order: "iterations" right after the iteration time.
  std::vector<std::string> keys;
  for (auto i = three.begin(); i != three.end(); ++i) keys.push_back(i.key());
  const auto at = std::find(keys.begin(), keys.end(), "iterations");
  ASSERT_NE(at, keys.begin());
  EXPECT_EQ(*(at - 1), "iteration_time_ns");
}

TEST(IterationsReport, TimelineCarriesTheIterationAndDiffRefusesIt) {
  const ir::Program p = one_f_one_b();
  FreeCost cost;
  for (int32_t n : {1, 2}) {
    engine::Simulator sim(p, cost, {.iterations = n});
    TimelineRecorder timeline(p, parse_rank_spec("all"));
    sim.add_observer(&timeline);
    sim.run();
    const std::string text = timeline_json(timeline.timeline());
    const auto j = nlohmann::json::parse(text);
    const auto& ops = j["ranks"][0]["streams"][0]["ops"];
    if (n == 1) {
      EXPECT_FALSE(j.contains("iterations"));
      EXPECT_EQ(ops[0].size(), 8u);
      continue;
    }
    EXPECT_EQ(j["iterations"], 2);
    ASSERT_EQ(ops[0].size(), 9u);
    // Ops in (iteration, op) order: the first half is iteration 0.
    const size_t half = ops.size() / 2;
    EXPECT_EQ(ops[0][8], 0);
    EXPECT_EQ(ops[half - 1][8], 0);
    EXPECT_EQ(ops[half][8], 1);
    EXPECT_EQ(ops[half][0], ops[0][0]);
    const std::string doc = "{\"scenario\":\"x\",\"cost_model\":\"c\",\"mode\":\"full\",\"num_gpus\":4,"
                            "\"iteration_time_ns\":1,\"ranks\":[],\"timeline\":" + text + "}";
    try {
      parse_diff_input(doc, "pred.json");
      FAIL() << "diff accepted a timeline of two iterations";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("timeline.iterations"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("compares one iteration"), std::string::npos) << e.what();
    }
  }
}

TEST(IterationsReport, TraceMarksIterations) {
  const ir::Program p = one_f_one_b();
  FreeCost cost;
  const std::string path = ::testing::TempDir() + "iterations_trace.json";
  {
    engine::Simulator sim(p, cost, {.iterations = 2});
    TraceWriter trace(p, path, parse_rank_spec("all"));
    sim.add_observer(&trace);
    sim.run();
    trace.commit();
  }
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  const auto j = nlohmann::json::parse(ss.str());
  EXPECT_EQ(j["otherData"]["iterations"], 2);
  EXPECT_EQ(j["otherData"]["run_time_ns"], 660000);
  int iter1 = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X" && e["args"].value("iter", -1) == 1) ++iter1;
  }
  EXPECT_GT(iter1, 0);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace lacuna::report
