// Several iterations in one run (SimulationOptions::iterations,
// docs/engine.md#iterations): streams wrap, waits count the records of earlier
// iterations, collectives and transfers keep matching in order.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <tuple>

#include "sim/engine/pipeline_program.h"
#include "sim/engine/simulator.h"

namespace lacuna::engine {
namespace {

using testing::add_class;
using testing::add_collective;
using testing::add_compute;
using testing::add_group;
using testing::add_rank;
using testing::add_record;
using testing::add_recv;
using testing::add_send;
using testing::add_wait;
using testing::ClosedFormCost;
using testing::make_pipeline_program;
using testing::PipelineSpec;
using testing::RecordingObserver;

std::vector<int64_t> ns(const std::vector<TimeNs>& v) {
  std::vector<int64_t> out;
  for (TimeNs t : v) out.push_back(t.count());
  return out;
}

std::vector<int64_t> iteration_times(const SimulationResult& r) {
  std::vector<int64_t> out;
  for (size_t k = 0; k < r.iteration_ends.size(); ++k) {
    out.push_back((r.iteration_ends[k] - (k == 0 ? TimeNs(0) : r.iteration_ends[k - 1])).count());
  }
  return out;
}

TEST(Iterations, OneStreamRunsItsOpsNTimesBackToBack) {
  ir::Program p;
  ir::RankClass* c = add_class(p, "c", 0, {"compute"});
  add_compute(c->mutable_streams(0), 100);
  add_compute(c->mutable_streams(0), 250);
  add_rank(p, 0);
  ClosedFormCost cost;
  Simulator sim(p, cost, {.iterations = 4});
  RecordingObserver obs;
  sim.add_observer(&obs);
  const SimulationResult r = sim.run();
  EXPECT_EQ(r.end_time.count(), 4 * 350);
  EXPECT_EQ(ns(r.iteration_ends), (std::vector<int64_t>{350, 700, 1050, 1400}));
  EXPECT_EQ(r.ops, 8u);
  ASSERT_EQ(obs.spans.size(), 8u);
  for (size_t i = 0; i < obs.spans.size(); ++i) {
    EXPECT_EQ(obs.spans[i].iteration, i / 2);
    EXPECT_EQ(obs.spans[i].op, static_cast<int32_t>(i % 2));
    EXPECT_EQ(obs.spans[i].ready, obs.spans[i].start);
  }
  EXPECT_EQ(obs.spans[2].start.count(), 350) << "iteration 1 starts where iteration 0 ended";
  EXPECT_EQ(*obs.run_end, r.end_time);
}

TEST(Iterations, WaitsOfIterationKNeedTheRecordsOfIterationK) {
  // Stream a records e twice per iteration; stream b waits for the second
  // record. In iteration k its wait needs the counter at 2k + 2, so it never
  // runs ahead on the records of an earlier iteration.
  ir::Program p;
  ir::RankClass* c = add_class(p, "c", 1, {"a", "b"});
  add_compute(c->mutable_streams(0), 100);
  add_record(c->mutable_streams(0), 0);
  add_compute(c->mutable_streams(0), 100);
  add_record(c->mutable_streams(0), 0);
  add_wait(c->mutable_streams(1), 0, 2);
  add_compute(c->mutable_streams(1), 30);
  add_rank(p, 0);
  ClosedFormCost cost;
  Simulator sim(p, cost, {.iterations = 3});
  RecordingObserver obs;
  sim.add_observer(&obs);
  const SimulationResult r = sim.run();
  // a: [0,200], [200,400], [400,600]; b: its compute after each second record.
  EXPECT_EQ(ns(r.iteration_ends), (std::vector<int64_t>{230, 430, 630}));
  for (uint32_t k = 0; k < 3; ++k) {
    const auto it = std::find_if(obs.spans.begin(), obs.spans.end(), [&](const OpSpan& s) {
      return s.stream == 1 && s.op == 1 && s.iteration == k;
    });
    ASSERT_NE(it, obs.spans.end());
    EXPECT_EQ(it->start.count(), 200 * (k + 1));
  }
  // The wait's cause is the compute before the record, in its iteration.
  ASSERT_EQ(obs.waits.size(), 3u);
  for (const auto& w : obs.waits) {
    EXPECT_TRUE(w.cause.valid);
    EXPECT_EQ(w.cause.op, 2);
    EXPECT_EQ(w.cause.end.count(), 200 * (w.span.iteration + 1));
  }
}

TEST(Iterations, TandemStreamsReachTheClosedFormSteadyState) {
  // Three streams in tandem: a computes t_a and records e0; b waits e0,
  // computes t_b and records e1; c waits e1 and computes t_c. Nothing makes
  // iteration k + 1 wait for iteration k beyond each stream's own order, so
  // this is a deterministic tandem line with unbounded buffers: the last op of
  // iteration k ends at D(k) = t_a + t_b + t_c + k · max(t_a, t_b, t_c).
  // Iteration 0 therefore takes the sum and every later one the bottleneck.
  for (const auto& [ta, tb, tc] : {std::tuple{100, 250, 40}, std::tuple{300, 20, 70}, std::tuple{10, 20, 500},
                                   std::tuple{80, 80, 80}, std::tuple{1, 999, 999}}) {
    ir::Program p;
    ir::RankClass* c = add_class(p, "c", 2, {"a", "b", "c"});
    add_compute(c->mutable_streams(0), ta);
    add_record(c->mutable_streams(0), 0);
    add_wait(c->mutable_streams(1), 0, 1);
    add_compute(c->mutable_streams(1), tb);
    add_record(c->mutable_streams(1), 1);
    add_wait(c->mutable_streams(2), 1, 1);
    add_compute(c->mutable_streams(2), tc);
    add_rank(p, 0);
    ClosedFormCost cost;
    constexpr int32_t n = 6;
    const SimulationResult r = Simulator(p, cost, {.iterations = n}).run();
    const int64_t sum = ta + tb + tc;
    const int64_t bottleneck = std::max({ta, tb, tc});
    std::vector<int64_t> closed_form{sum};
    for (int32_t k = 1; k < n; ++k) closed_form.push_back(bottleneck);
    SCOPED_TRACE(std::to_string(ta) + "/" + std::to_string(tb) + "/" + std::to_string(tc));
    EXPECT_EQ(iteration_times(r), closed_form);
    EXPECT_EQ(r.end_time.count(), sum + (n - 1) * bottleneck);
  }
}

TEST(Iterations, CollectivesAndTransfersMatchAcrossIterationBoundaries) {
  // Two ranks: rank 0 computes 1000 ns then sends; rank 1 receives then
  // all-reduces with rank 0, whose all-reduce comes first on its stream. In
  // iteration 1 rank 0's all-reduce must meet rank 1's second, not its first.
  ir::Program p;
  p.add_group_slots()->set_name("g");
  p.add_peer_slots()->set_name("peer");
  ir::RankClass* c0 = add_class(p, "r0", 0, {"s"});
  add_compute(c0->mutable_streams(0), 1000);
  add_send(c0->mutable_streams(0), 0, 10, 0, 7, 50);
  add_collective(c0->mutable_streams(0), ir::ALL_REDUCE, 0, 8, 200);
  ir::RankClass* c1 = add_class(p, "r1", 0, {"s"});
  add_recv(c1->mutable_streams(0), 0, 10, 0, 7);
  add_collective(c1->mutable_streams(0), ir::ALL_REDUCE, 0, 8, 200);
  const int32_t g = add_group(p, ir::DP, {0, 1});
  add_rank(p, 0, {g}, {1});
  add_rank(p, 1, {g}, {0});
  ClosedFormCost cost;
  Simulator sim(p, cost, {.iterations = 3});
  RecordingObserver obs;
  sim.add_observer(&obs);
  const SimulationResult r = sim.run();
  // Per iteration: compute 1000, send 50, all-reduce 200 = 1250.
  EXPECT_EQ(ns(r.iteration_ends), (std::vector<int64_t>{1250, 2500, 3750}));
  ASSERT_EQ(obs.transfers.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(obs.transfers[k].first.iteration, k);
    EXPECT_EQ(obs.transfers[k].second.iteration, k);
  }
}

TEST(Iterations, DeadlockMessageNamesTheIteration) {
  // Rank 1 receives twice per iteration, rank 0 sends once: in iteration 0
  // the second recv meets iteration 1's send; in iteration 1 nothing is left.
  ir::Program p;
  p.add_peer_slots()->set_name("peer");
  ir::RankClass* c0 = add_class(p, "r0", 0, {"s"});
  add_send(c0->mutable_streams(0), 0, 10, 0, 7, 50);
  ir::RankClass* c1 = add_class(p, "r1", 0, {"s"});
  add_recv(c1->mutable_streams(0), 0, 10, 0, 7);
  add_recv(c1->mutable_streams(0), 0, 10, 0, 7);
  add_rank(p, 0, {}, {1});
  add_rank(p, 1, {}, {0});
  ClosedFormCost cost;
  Simulator sim(p, cost, {.iterations = 2});
  try {
    sim.run();
    FAIL() << "expected a deadlock";
  } catch (const DeadlockError& e) {
    ASSERT_EQ(e.blocked().size(), 1u);
    EXPECT_EQ(e.blocked()[0].rank, 1);
    EXPECT_EQ(e.blocked()[0].op, 0);
    EXPECT_EQ(e.blocked()[0].description.rfind("in iteration 1: recv from rank 0", 0), 0u)
        << e.blocked()[0].description;
  }
}

TEST(Iterations, RejectsZeroIterations) {
  ir::Program p;
  add_compute(add_class(p, "c", 0, {"s"})->mutable_streams(0), 10);
  add_rank(p, 0);
  ClosedFormCost cost;
  EXPECT_THROW(Simulator(p, cost, {.iterations = 0}), Error);
}

// The spans of a run, keyed by (iteration, rank, stream, op).
using SpanKey = std::tuple<uint32_t, int32_t, int32_t, int32_t>;
std::map<SpanKey, std::tuple<int64_t, int64_t, int64_t>> spans_by_key(const RecordingObserver& obs) {
  std::map<SpanKey, std::tuple<int64_t, int64_t, int64_t>> out;
  for (const OpSpan& s : obs.spans) {
    out[{s.iteration, s.rank, s.stream, s.op}] = {s.ready.count(), s.start.count(), s.end.count()};
  }
  return out;
}

TEST(Iterations, IterationZeroIsTheSingleIterationAndLaterOnesRepeat) {
  // Random Megatron-shaped programs (GPipe order, TP all-reduces, p2p, a DP
  // all-reduce on its own stream that the next iteration does not wait for).
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    std::mt19937_64 rng(seed);
    PipelineSpec spec;
    spec.tp = 1 + static_cast<int32_t>(rng() % 3);
    spec.pp = 1 + static_cast<int32_t>(rng() % 4);
    spec.dp = 1 + static_cast<int32_t>(rng() % 3);
    spec.microbatches = 1 + static_cast<int32_t>(rng() % 4);
    spec.fixed_comm = rng() % 2 == 0;
    spec.seed = seed;
    const ir::Program p = make_pipeline_program(spec);
    ClosedFormCost cost;
    Simulator one(p, cost);
    RecordingObserver one_obs;
    one.add_observer(&one_obs);
    const SimulationResult single = one.run();

    const int32_t n = 5;
    Simulator many(p, cost, {.iterations = n});
    RecordingObserver many_obs;
    many.add_observer(&many_obs);
    const SimulationResult r = many.run();
    SCOPED_TRACE("seed " + std::to_string(seed));
    ASSERT_EQ(r.iteration_ends.size(), static_cast<size_t>(n));
    EXPECT_EQ(r.iteration_ends[0], single.end_time);
    EXPECT_EQ(r.ops, n * single.ops);
    // Iteration 0's spans are exactly the single run's.
    const auto a = spans_by_key(one_obs);
    const auto b = spans_by_key(many_obs);
    ASSERT_EQ(b.size(), n * a.size());
    for (const auto& [key, value] : a) EXPECT_EQ(b.at(key), value);
    // A deterministic program reaches a steady state: from iteration 1 on
    // every iteration takes the same time.
    const std::vector<int64_t> t = iteration_times(r);
    for (int32_t k = 2; k < n; ++k) EXPECT_EQ(t[static_cast<size_t>(k)], t[1]) << "iteration " << k;
    EXPECT_LE(t[1], t[0]) << "a later iteration overlaps the previous one's drain";
    // Fold is exact without variability, for every iteration.
    Simulator folded(p, cost, {.fold = true, .iterations = n});
    EXPECT_EQ(ns(folded.run().iteration_ends), ns(r.iteration_ends));
  }
}

TEST(Iterations, ResultsAreIdenticalAcrossRuns) {
  PipelineSpec spec;
  spec.tp = 2;
  spec.pp = 3;
  spec.dp = 2;
  const ir::Program p = make_pipeline_program(spec);
  ClosedFormCost cost;
  Simulator sim(p, cost, {.iterations = 3});
  const SimulationResult a = sim.run();
  const SimulationResult b = sim.run();
  EXPECT_EQ(ns(a.iteration_ends), ns(b.iteration_ends));
  EXPECT_EQ(a.events, b.events);
}

}  // namespace
}  // namespace lacuna::engine
