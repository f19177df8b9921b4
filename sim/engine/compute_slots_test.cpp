// SimulationOptions::compute_slots: ranks sharing one host's N cores (the
// semantics of `lacuna execute --backend cpu --compute-slots N`).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "sim/engine/engine_test_support.h"
#include "sim/engine/pipeline_program.h"
#include "sim/engine/simulator.h"

namespace lacuna::engine {
namespace {

using testing::add_class;
using testing::add_compute;
using testing::add_rank;
using testing::ClosedFormCost;
using testing::PipelineSpec;
using testing::RecordingObserver;
using ::testing::HasSubstr;

constexpr int64_t kMs = 1'000'000;

// `ranks` ranks with one stream of `kernels` compute ops of 10 ms each: cost
// model timed (ClosedFormCost: flops = ns), or fixed durations.
ir::Program independent_ranks(int ranks, int kernels, bool fixed) {
  ir::Program p;
  ir::RankClass* c = add_class(p, "r", 0, {"compute"});
  for (int k = 0; k < kernels; ++k) add_compute(c->mutable_streams(0), fixed ? 10 * kMs : 0, fixed ? 0 : 10.0 * kMs);
  for (int r = 0; r < ranks; ++r) add_rank(p, 0);
  return p;
}

RecordingObserver run(const ir::Program& p, int32_t slots, TimeNs* end = nullptr) {
  ClosedFormCost cost;
  Simulator sim(p, cost, SimulationOptions{.compute_slots = slots});
  RecordingObserver obs;
  sim.add_observer(&obs);
  const SimulationResult r = sim.run();
  if (end != nullptr) *end = r.end_time;
  return obs;
}

const OpSpan& span_of(const RecordingObserver& obs, int rank, int op) {
  for (const OpSpan& s : obs.spans) {
    if (s.rank == rank && s.op == op) return s;
  }
  ADD_FAILURE() << "no span for rank " << rank << " op " << op;
  static const OpSpan none;
  return none;
}

TEST(ComputeSlots, OneSlotSerialisesRanksFirstComeFirstServed) {
  TimeNs end;
  const RecordingObserver obs = run(independent_ranks(3, 1, false), 1, &end);
  EXPECT_EQ(end, TimeNs(30 * kMs));
  for (int r = 0; r < 3; ++r) {
    const OpSpan& s = span_of(obs, r, 0);
    EXPECT_EQ(s.ready, TimeNs(0)) << "every rank reaches its kernel at once";
    EXPECT_EQ(s.start, TimeNs(10 * kMs * r)) << "and waits for the slot in rank (event) order";
    EXPECT_EQ(s.end, TimeNs(10 * kMs * (r + 1)));
  }
}

TEST(ComputeSlots, TwoSlotsRunTwoAtOnce) {
  TimeNs end;
  const RecordingObserver obs = run(independent_ranks(3, 2, false), 2, &end);
  // 6 kernels of 10 ms on 2 slots: 30 ms.
  EXPECT_EQ(end, TimeNs(30 * kMs));
}

TEST(ComputeSlots, ZeroMeansNoLimit) {
  TimeNs end;
  run(independent_ranks(4, 2, false), 0, &end);
  EXPECT_EQ(end, TimeNs(20 * kMs));
}

TEST(ComputeSlots, FixedDurationComputeTakesNoSlot) {
  TimeNs end;
  run(independent_ranks(3, 1, true), 1, &end);
  EXPECT_EQ(end, TimeNs(10 * kMs));
}

TEST(ComputeSlots, FoldAndNegativeAreErrors) {
  const ir::Program p = independent_ranks(2, 1, false);
  ClosedFormCost cost;
  try {
    Simulator sim(p, cost, SimulationOptions{.fold = true, .compute_slots = 1});
    FAIL() << "fold with compute slots was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("no `fold`"));
  }
  EXPECT_THROW(Simulator(p, cost, SimulationOptions{.compute_slots = -1}), Error);
}

// A Megatron-shaped random program whose kernels are timed by the cost model
// (the pipeline program's are fixed durations, which take no slot).
ir::Program random_cost_timed_program(uint64_t seed) {
  std::mt19937_64 rng(seed);
  PipelineSpec spec;
  spec.tp = 1 + static_cast<int32_t>(rng() % 3);
  spec.pp = 1 + static_cast<int32_t>(rng() % 3);
  spec.dp = 1 + static_cast<int32_t>(rng() % 2);
  spec.microbatches = 1 + static_cast<int32_t>(rng() % 4);
  spec.layers_per_stage = 1 + static_cast<int32_t>(rng() % 3);
  spec.seed = seed;
  ir::Program p = testing::make_pipeline_program(spec);
  for (ir::RankClass& c : *p.mutable_classes()) {
    for (ir::Stream& s : *c.mutable_streams()) {
      for (ir::Op& op : *s.mutable_ops()) {
        if (!op.has_compute()) continue;
        op.mutable_compute()->set_flops(static_cast<double>(op.compute().fixed_duration_ns()));
        op.mutable_compute()->set_fixed_duration_ns(0);
      }
    }
  }
  return p;
}

// The most compute spans running at one instant.
int max_concurrent_compute(const RecordingObserver& obs) {
  std::vector<std::pair<TimeNs, int>> edges;
  for (const OpSpan& s : obs.spans) {
    if (!s.ir->has_compute() || s.end == s.start) continue;
    edges.emplace_back(s.start, +1);
    edges.emplace_back(s.end, -1);
  }
  std::sort(edges.begin(), edges.end());  // an end (-1) sorts before a start at the same time
  int now = 0, most = 0;
  for (const auto& [t, d] : edges) most = std::max(most, now += d);
  return most;
}

TEST(ComputeSlots, NeverMoreKernelsAtOnceThanSlotsOnRandomPrograms) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const ir::Program p = random_cost_timed_program(seed);
    TimeNs unlimited_end;
    const RecordingObserver unlimited = run(p, 0, &unlimited_end);
    for (int32_t slots : {1, 2, 3}) {
      TimeNs end;
      const RecordingObserver limited = run(p, slots, &end);
      EXPECT_LE(max_concurrent_compute(limited), slots) << "seed " << seed << " slots " << slots;
      EXPECT_GE(end, unlimited_end) << "fewer cores cannot make the iteration shorter (seed " << seed << ")";
      EXPECT_EQ(limited.spans.size(), unlimited.spans.size());
      for (const OpSpan& s : limited.spans) EXPECT_LE(s.ready, s.start);
    }
    // As many slots as streams: nothing ever waits, the run is the unlimited one.
    TimeNs wide_end;
    run(p, 1000, &wide_end);
    EXPECT_EQ(wide_end, unlimited_end) << "seed " << seed;
  }
}

TEST(ComputeSlots, RunsAreDeterministic) {
  const ir::Program p = random_cost_timed_program(7);
  const RecordingObserver a = run(p, 2);
  const RecordingObserver b = run(p, 2);
  ASSERT_EQ(a.spans.size(), b.spans.size());
  for (size_t i = 0; i < a.spans.size(); ++i) {
    EXPECT_EQ(a.spans[i].rank, b.spans[i].rank);
    EXPECT_EQ(a.spans[i].op, b.spans[i].op);
    EXPECT_EQ(a.spans[i].start, b.spans[i].start);
    EXPECT_EQ(a.spans[i].end, b.spans[i].end);
  }
}

}  // namespace
}  // namespace lacuna::engine
