// The report observers on real engine runs: a synthetic pipeline whose
// bubbles have closed forms, and a compiled scenario (full vs folded).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sim/compiler/compile.h"
#include "sim/cost/cost_model.h"
#include "sim/engine/simulator.h"
#include "sim/report/observers/bubble_accounting.h"
#include "sim/report/observers/comm_accounting.h"
#include "sim/report/formats/json_report.h"
#include "sim/report/formats/pipeline_svg.h"
#include "sim/report/analyses/summary.h"
#include "sim/scenario/scenario.h"
#include "sim/schedule/synthetic.h"
#include "sim/report/observers/test_fixture.h"

namespace lacuna::report {
namespace {

// Synthetic programs fix every compute duration; a transfer of fixed
// duration 0 asks the cost model, which makes it free.
class FreeTransfersCost : public cost::CostModel {
 public:
  std::string_view name() const override { return "free transfers"; }
  TimeNs compute(const ir::Compute&) const override { return fail(); }
  TimeNs collective(ir::CollectiveKind, int64_t, const cost::GroupShape&) const override { return fail(); }
  TimeNs p2p(int64_t, bool) const override { return TimeNs::zero(); }

 private:
  static TimeNs fail() {
    ADD_FAILURE() << "cost model asked for a fixed-duration op";
    return TimeNs(1);
  }
};

ir::Program one_f_one_b(TimeNs p2p) {
  schedule::SyntheticPipeline s;
  s.kind = scenario::ONE_F_ONE_B;
  s.shape = {.pp = 4, .virtual_stages = 1, .microbatches = 8};
  s.per_stage = {{10_us, 15_us, 5_us}};
  s.p2p = p2p;
  return schedule::build_synthetic_program(s);
}

TEST(ReportOnEngine, OneFOneBBubblesMatchTheClosedForm) {
  const ir::Program p = one_f_one_b(0_ns);
  FreeTransfersCost cost;
  engine::Simulator sim(p, cost);
  BubbleAccounting acc;
  sim.add_observer(&acc);
  const auto result = sim.run();
  // (m + p - 1)(F + B + W) = 11 · 30 µs.
  ASSERT_EQ(result.end_time, 330_us);
  ASSERT_EQ(acc.ranks().size(), 4u);
  for (const RankAccount& r : acc.ranks()) {
    const int64_t s = r.rank;  // pipeline stage
    SCOPED_TRACE(s);
    EXPECT_EQ(r.busy, 240_us);
    EXPECT_EQ(r.bubble(Bubble::kPpWarmup), 10_us * s);             // s forwards ahead of it
    EXPECT_EQ(r.bubble(Bubble::kPpCooldown), 20_us * s);           // s backwards after its last
    EXPECT_EQ(r.bubble(Bubble::kPpOther), 30_us * (3 - s));        // the rest of (p-1)(F+B+W)
    EXPECT_EQ(r.bubble(Bubble::kPpExposed), 0_ns);
    EXPECT_EQ(r.idle(), 90_us);
  }
}

TEST(ReportOnEngine, TransfersShowUpAsExposedPpAndCategoriesStillSumExactly) {
  const ir::Program p = one_f_one_b(1_us);
  FreeTransfersCost cost;
  engine::Simulator sim(p, cost);
  BubbleAccounting acc;
  sim.add_observer(&acc);
  const auto result = sim.run();
  for (const RankAccount& r : acc.ranks()) {
    EXPECT_EQ(r.busy + r.idle(), result.end_time) << r.rank;
  }
  // Stage 1 waits for stage 0's first forward plus its transfer.
  EXPECT_EQ(acc.ranks()[1].bubble(Bubble::kPpWarmup), 10_us);
  EXPECT_GE(acc.ranks()[1].bubble(Bubble::kPpExposed), 1_us);
  EXPECT_EQ(acc.ranks()[0].bubble(Bubble::kPpWarmup), 0_ns);
}

// One compute stream of n forward kernels of d ns, each launched in h ns
// (docs/engine.md#host).
ir::Program kernel_stream(int n, int64_t d, int64_t h) {
  ir::Program p;
  ir::RankClass* c = p.add_classes();
  ir::Stream* s = c->add_streams();
  s->set_name("compute");
  s->set_kind(ir::COMPUTE);
  for (int i = 0; i < n; ++i) {
    ir::Op* op = s->add_ops();
    op->set_phase(ir::FORWARD);
    op->set_host_ns(h);
    op->mutable_compute()->set_fixed_duration_ns(d);
  }
  p.add_ranks()->set_class_id(0);
  return p;
}

TEST(ReportOnEngine, AKernelStreamIdlesOnlyForItsHost) {
  // Kernel-bound (h <= d): the first launch, h. Launch-bound: every launch
  // but the part the previous kernel hid, T − n·d = h + (n − 1)(h − d).
  for (const int64_t h : {0, 30, 100, 150}) {
    SCOPED_TRACE(h);
    const ir::Program p = kernel_stream(8, 100, h);
    FreeTransfersCost cost;
    engine::Simulator sim(p, cost);
    BubbleAccounting acc;
    sim.add_observer(&acc);
    const TimeNs end = sim.run().end_time;
    const RankAccount& r = acc.ranks()[0];
    EXPECT_EQ(r.bubble(Bubble::kHostOverhead).count(), h <= 100 ? h : h + 7 * (h - 100));
    EXPECT_EQ(r.idle(), r.bubble(Bubble::kHostOverhead)) << "nothing else keeps the stream idle";
    EXPECT_EQ(r.busy, TimeNs(800));
    EXPECT_EQ(r.busy + r.idle(), end);
  }
}

TEST(ReportOnEngine, HostCostsOnAPipelineKeepTheExactSums) {
  // 3 µs launches (F = 10, B = 15, W = 5 µs: kernel-bound) and a host
  // synchronisation every fifth compute-stream op, so the host is late after
  // syncs and after waits that it sat out.
  ir::Program p = one_f_one_b(1_us);
  for (ir::RankClass& c : *p.mutable_classes()) {
    for (ir::Stream& s : *c.mutable_streams()) {
      if (s.kind() != ir::COMPUTE) continue;
      for (int i = 0; i < s.ops_size(); ++i) {
        s.mutable_ops(i)->set_host_ns(3000);
        s.mutable_ops(i)->set_host_sync(i % 5 == 0);
      }
    }
  }
  FreeTransfersCost cost;
  engine::Simulator plain_sim(one_f_one_b(1_us), cost);
  const TimeNs plain = plain_sim.run().end_time;
  engine::Simulator sim(p, cost);
  BubbleAccounting acc;
  sim.add_observer(&acc);
  const TimeNs end = sim.run().end_time;
  EXPECT_GT(end, plain);
  for (const RankAccount& r : acc.ranks()) {
    SCOPED_TRACE(r.rank);
    EXPECT_EQ(r.busy, 240_us) << "the host delays kernels, it never lengthens them";
    EXPECT_EQ(r.busy + r.idle(), end);
    EXPECT_GE(r.bubble(Bubble::kHostOverhead), 3_us) << "at least the first launch";
  }
  const Summary s = summarize(p, acc, "free transfers", false);
  const auto json = nlohmann::json::parse(summary_json(s));
  EXPECT_GT(json["bubble_summary"]["host_overhead"]["max_s"].get<double>(), 0.0);
}

TEST(ReportOnEngine, CompiledScenarioFullAndFoldedAgree) {
  const auto loaded = scenario::load_scenario(std::string(LACUNA_SOURCE_DIR) + "/scenarios/llm/gpt-1.3b-8gpu.pbtxt");
  const ir::Program program = compiler::compile(loaded);
  const auto cost = cost::make_analytic_cost_model(program.cluster(), program.info().precision());

  auto run = [&](bool fold) {
    engine::Simulator sim(program, *cost, engine::SimulationOptions{.fold = fold});
    BubbleAccounting acc;
    CommAccounting comm;
    PipelineSvg svg(program, parse_rank_spec("pipeline"));
    sim.add_observer(&acc);
    sim.add_observer(&comm);
    sim.add_observer(&svg);
    const auto result = sim.run();
    EXPECT_EQ(acc.iteration_time(), result.end_time);
    for (const RankAccount& r : acc.ranks()) {
      EXPECT_EQ(r.busy + r.idle(), result.end_time) << r.rank;
      EXPECT_GT(r.busy, TimeNs::zero());
      EXPECT_GT(r.peak_memory, r.baseline_memory) << "activations come and go";
    }
    EXPECT_EQ(svg.drawn_ranks().size(), static_cast<size_t>(program.info().pp()));
    Summary s = summarize(program, acc, std::string(cost->name()), fold);
    s.comm = comm.summary();
    s.links = analytic_links();
    return s;
  };
  const Summary full = run(false);
  const Summary folded = run(true);
  EXPECT_EQ(full.iteration_time, folded.iteration_time);
  EXPECT_GT(full.mfu, 0.0);
  EXPECT_LT(full.mfu, 1.0);
  for (int b = 0; b < kNumBubbles; ++b) {
    EXPECT_EQ(full.bubbles[b].median, folded.bubbles[b].median) << bubble_key(static_cast<Bubble>(b));
    EXPECT_EQ(full.bubbles[b].max, folded.bubbles[b].max) << bubble_key(static_cast<Bubble>(b));
  }
  EXPECT_EQ(full.peak_memory.max, folded.peak_memory.max);
  EXPECT_GT(full.bubbles[static_cast<int>(Bubble::kTpExposed)].max, 0) << "TP 2 with sequence parallelism";
  EXPECT_GT(full.bubbles[static_cast<int>(Bubble::kPpWarmup)].max, 0) << "PP 2";

  // Achieved bandwidth: the same per rank whether folded or not (the ranks
  // are symmetric); TP collectives and pipeline transfers are there.
  ASSERT_TRUE(full.comm && folded.comm);
  EXPECT_TRUE(folded.comm->folded);
  ASSERT_EQ(full.comm->rows.size(), folded.comm->rows.size());
  bool tp = false, pp = false;
  for (size_t i = 0; i < full.comm->rows.size(); ++i) {
    const CommRow& a = full.comm->rows[i];
    const CommRow& b = folded.comm->rows[i];
    SCOPED_TRACE(std::string(a.group) + " " + std::string(a.op));
    EXPECT_EQ(a.group, b.group);
    EXPECT_EQ(a.op, b.op);
    EXPECT_DOUBLE_EQ(a.ops_per_rank(), b.ops_per_rank());
    EXPECT_NEAR(a.mean_busbw(), b.mean_busbw(), 1e-9 * a.mean_busbw());
    EXPECT_GT(a.mean_busbw(), 0.0);
    EXPECT_LE(a.min_busbw, a.mean_busbw() * (1 + 1e-12));
    tp = tp || a.group == "tp";
    pp = pp || (a.group == "pp" && a.op == "send_recv");
  }
  EXPECT_TRUE(tp);
  EXPECT_TRUE(pp);

  const auto j = nlohmann::json::parse(summary_json(full));
  EXPECT_EQ(j["comm"]["collectives"].size(), full.comm->rows.size());
  EXPECT_EQ(j["ranks"].size(), static_cast<size_t>(program.ranks_size()));
  EXPECT_EQ(summary_json(full), summary_json(run(false))) << "deterministic";
}

}  // namespace
}  // namespace lacuna::report
