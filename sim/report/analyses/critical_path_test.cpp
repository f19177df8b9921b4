// The critical path's composition, slack per rank and sensitivity, in closed
// form on the one-slow-rank program (straggler_fixture.h).
#include "sim/report/analyses/critical_path.h"

#include <gtest/gtest.h>

#include "sim/cost/scaled_cost_model.h"
#include "sim/engine/simulator.h"
#include "sim/report/observers/op_graph_recorder.h"
#include "sim/report/observers/straggler_fixture.h"

namespace lacuna::report {
namespace {

struct Result {
  TimeNs end;
  CriticalPathReport report;
};

Result analyse(const ir::Program& p, bool whole) {
  engine::testing::ClosedFormCost cost;
  engine::Simulator sim(p, cost);
  OpGraphRecorder rec(whole ? OpGraphRecorder::kAlways : 0);
  sim.add_observer(&rec);
  Result r;
  r.end = sim.run().end_time;
  PathInputs in;
  in.path = &rec.path();
  GraphTiming timing;
  if (whole) {
    timing = time_graph(*rec.graph());
    in.graph = rec.graph();
    in.timing = &timing;
  }
  in.pruned_peak_nodes = rec.peak_live_nodes();
  in.simulated_ranks = {0, 1, 2, 3, 4, 5, 6, 7};
  in.traced_ranks = {2};
  r.report = summarize_critical_path(p, in);
  return r;
}

TimeNs share(const std::vector<PathShare>& v, const std::string& key) {
  for (const PathShare& s : v) {
    if (s.key == key) return s.time;
  }
  return TimeNs(-1);
}

// T = 1500 + 50 + 1500 + 100 = 3150: rank 2's two GEMMs and its TP
// all-reduce, then the DP reduce-scatter that waited for it.
TEST(CriticalPath, CompositionOfTheSlowRankProgram) {
  const Result r = analyse(testing::slow_rank_program({}), true);
  EXPECT_EQ(r.end, TimeNs(3150));
  const CriticalPathReport& c = r.report;
  EXPECT_EQ(c.path.length, TimeNs(3150));
  ASSERT_EQ(c.path.steps.size(), 4u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c.path.steps[static_cast<size_t>(i)].rank, 2);
  EXPECT_EQ(share(c.by_class, "compute gemm"), TimeNs(3000));
  EXPECT_EQ(share(c.by_class, "collective AR tp"), TimeNs(50));
  EXPECT_EQ(share(c.by_class, "collective RS dp"), TimeNs(100));
  EXPECT_EQ(c.by_class.front().key, "compute gemm");
  EXPECT_EQ(share(c.by_category, "compute forward"), TimeNs(3000));
  EXPECT_EQ(share(c.by_category, "tp_exposed"), TimeNs(50));
  EXPECT_EQ(share(c.by_category, "dp_exposed"), TimeNs(100));
  EXPECT_EQ(share(c.by_category, "pp_other"), TimeNs(0)) << "stalls are never on a critical path";
  TimeNs categories;
  for (const PathShare& s : c.by_category) categories += s.time;
  EXPECT_EQ(categories, TimeNs(3150));
  ASSERT_FALSE(c.by_rank.empty());
  EXPECT_EQ(c.by_rank[0].rank, 2);
  EXPECT_EQ(c.by_rank[0].time, TimeNs(3050));
  EXPECT_EQ(c.ranks_on_path, 2);
  EXPECT_EQ(c.rank_changes, 1);
}

// Slack per rank (least slack of its compute ops), worked out by hand: rank 2
// is critical; rank 3 could start each GEMM 500 ns later (it waits for rank 2
// in TP), every other rank 1000 ns (its DP reduce-scatter waits for rank 2's
// or ends 500 ns early).
TEST(CriticalPath, SlackPerRankAndPerOp) {
  const Result r = analyse(testing::slow_rank_program({}), true);
  ASSERT_TRUE(r.report.has_slack());
  const std::vector<int64_t> expected = {1000, 1000, 0, 500, 1000, 1000, 1000, 1000};
  ASSERT_EQ(r.report.rank_slack.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(r.report.rank_slack[i].rank, static_cast<int32_t>(i));
    EXPECT_EQ(r.report.rank_slack[i].min_compute.count(), expected[i]) << "rank " << i;
    EXPECT_EQ(r.report.rank_slack[i].compute_ops, 2);
  }
  EXPECT_EQ(r.report.rank_slack[2].critical_compute_ops, 2);
  // Op slack of the traced rank 2: its two GEMMs, TP and DP collectives.
  ASSERT_EQ(r.report.op_slack.size(), 4u);
  for (const OpSlack& o : r.report.op_slack) {
    EXPECT_EQ(o.rank, 2);
    EXPECT_EQ(o.slack, TimeNs::zero());
  }
}

// GEMMs are 3000 of the path: 10 % faster saves at most 300 ns, and
// re-simulated with every GEMM at 0.9× (rank 2's at 1350 ns) the iteration is
// 1350 + 50 + 1350 + 100 = 2850: exactly the estimate here.
TEST(CriticalPath, SensitivityEstimateAndResimulation) {
  const ir::Program p = testing::slow_rank_program({});
  const Result r = analyse(p, false);
  ASSERT_EQ(r.report.sensitivity.size(), 1u);
  const Sensitivity& s = r.report.sensitivity[0];
  EXPECT_EQ(s.op_class, ir::GEMM);
  EXPECT_EQ(s.key, "compute gemm");
  EXPECT_EQ(s.on_path, TimeNs(3000));
  EXPECT_EQ(s.estimate, TimeNs(300));
  engine::testing::ClosedFormCost inner;
  const cost::ScaledCostModel faster(inner, ir::GEMM, 0.9);
  engine::Simulator sim(p, faster);
  EXPECT_EQ(sim.run().end_time, TimeNs(2850));
  EXPECT_EQ(r.report.graph, "pruned");
  EXPECT_FALSE(r.report.has_slack());
}

TEST(CriticalPath, PrunedAndWholeAgree) {
  const ir::Program p = testing::slow_rank_program({.scale = 1.3, .rounds = 4});
  const Result a = analyse(p, true), b = analyse(p, false);
  EXPECT_EQ(a.report.by_class.size(), b.report.by_class.size());
  for (size_t i = 0; i < a.report.by_class.size(); ++i) {
    EXPECT_EQ(a.report.by_class[i].key, b.report.by_class[i].key);
    EXPECT_EQ(a.report.by_class[i].time, b.report.by_class[i].time);
  }
  EXPECT_EQ(a.report.path.steps.size(), b.report.path.steps.size());
}

TEST(ScaledCostModel, ScalesOneClassOnly) {
  engine::testing::ClosedFormCost inner;
  const cost::ScaledCostModel m(inner, ir::ATTENTION, 0.9);
  ir::Compute attention, gemm;
  attention.set_op_class(ir::ATTENTION);
  attention.set_flops(1005);
  gemm.set_op_class(ir::GEMM);
  gemm.set_flops(1005);
  EXPECT_EQ(m.compute(attention), TimeNs(905));  // 904.5 rounds to 905
  EXPECT_EQ(m.compute(gemm), TimeNs(1005));
  EXPECT_EQ(m.p2p(1000, true), inner.p2p(1000, true));
  EXPECT_THROW(cost::ScaledCostModel(inner, ir::GEMM, 0.0), Error);
}

}  // namespace
}  // namespace lacuna::report
