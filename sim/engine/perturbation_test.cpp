// The variability seam (perturbation.h): an identity perturbation changes
// nothing; per-rank factors scale exactly that rank's kernels; one straggler
// in a DP group delays the group's reduce-scatter by exactly its extra
// compute; slowing any rank never shortens an iteration (random programs);
// host pauses hide behind a host that runs ahead, launch skew does not; fold
// takes a class's slowest member and refuses per-op hooks.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <random>

#include "sim/engine/pipeline_program.h"
#include "sim/engine/simulator.h"

namespace lacuna::engine {
namespace {

using testing::ClosedFormCost;
using testing::PipelineSpec;
using testing::RecordingObserver;

// A perturbation given by plain tables and functions.
class TablePerturbation : public Perturbation {
 public:
  double rank_compute_factor(int32_t rank) const override {
    auto it = rank_factor.find(rank);
    return it == rank_factor.end() ? 1.0 : it->second;
  }
  uint8_t perturbs(const ir::Op& op, ir::StreamKind /*kind*/) const override {
    return static_cast<uint8_t>((op_factor && op.has_compute() ? kPerturbCompute : 0) |
                                (delay && (op.has_compute() || op.has_collective()) ? kPerturbHost : 0));
  }
  double compute_factor(const OpRef& op) const override { return op_factor ? op_factor(op) : 1.0; }
  HostDelay host_delay(const OpRef& op) const override { return delay ? delay(op) : HostDelay{}; }

  std::map<int32_t, double> rank_factor;
  std::function<double(const OpRef&)> op_factor;
  std::function<HostDelay(const OpRef&)> delay;
};

std::vector<OpSpan> spans_of(const ir::Program& p, const Perturbation* perturbation, bool fold = false) {
  ClosedFormCost cost;
  Simulator sim(p, cost, SimulationOptions{.fold = fold, .perturbation = perturbation});
  RecordingObserver obs;
  sim.add_observer(&obs);
  sim.run();
  return obs.spans;
}

TimeNs end_of(const ir::Program& p, const Perturbation* perturbation, bool fold = false) {
  ClosedFormCost cost;
  Simulator sim(p, cost, SimulationOptions{.fold = fold, .perturbation = perturbation});
  return sim.run().end_time;
}

void expect_same_spans(const std::vector<OpSpan>& a, const std::vector<OpSpan>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].rank, b[i].rank);
    ASSERT_EQ(a[i].stream, b[i].stream);
    ASSERT_EQ(a[i].op, b[i].op);
    ASSERT_EQ(a[i].ready, b[i].ready);
    ASSERT_EQ(a[i].issued, b[i].issued);
    ASSERT_EQ(a[i].start, b[i].start);
    ASSERT_EQ(a[i].end, b[i].end);
  }
}

// Every hook present but neutral: every span exactly as without a
// perturbation (host costs on, so the host path is exercised too).
TEST(Perturbation, NeutralPerturbationChangesNothing) {
  PipelineSpec spec;
  spec.seed = 7;
  ir::Program p = testing::make_pipeline_program(spec);
  testing::add_random_host_costs(p, 3, 2000, 6);
  TablePerturbation neutral;
  neutral.op_factor = [](const OpRef&) { return 1.0; };
  neutral.delay = [](const OpRef&) { return HostDelay{}; };
  expect_same_spans(spans_of(p, nullptr), spans_of(p, &neutral));
}

// N ranks each compute C, then reduce-scatter over all of them (fixed D).
ir::Program dp_group(int32_t n, int64_t compute_ns, int64_t rs_ns) {
  ir::Program p;
  p.add_group_slots()->set_name("dp");
  ir::RankClass* c = testing::add_class(p, "r", 0, {"compute"});
  testing::add_compute(c->mutable_streams(0), compute_ns);
  testing::add_collective(c->mutable_streams(0), ir::REDUCE_SCATTER, 0, 1 << 20, rs_ns);
  std::vector<int32_t> all(static_cast<size_t>(n));
  for (int32_t r = 0; r < n; ++r) all[static_cast<size_t>(r)] = r;
  const int32_t g = testing::add_group(p, ir::DP, all);
  for (int32_t r = 0; r < n; ++r) testing::add_rank(p, 0, {g}, {}, r);
  return p;
}

// Closed form: the reduce-scatter starts when the straggler arrives,
// round(C·f) after 0, i.e. exactly round(C·f) − C later than with no
// straggler; every member ends together at round(C·f) + D. Folded the same.
TEST(Perturbation, OneStragglerDelaysItsGroupsReduceScatterByItsExtraCompute) {
  const int64_t c = 1'234'567;
  const int64_t d = 50'000;
  const ir::Program p = dp_group(16, c, d);
  for (double f : {1.0, 1.0001, 1.03, 1.10, 2.5}) {
    TablePerturbation one;
    one.rank_factor[11] = f;
    const std::vector<OpSpan> spans = spans_of(p, &one);
    const int64_t slowed = std::llround(static_cast<double>(c) * f);
    for (const OpSpan& s : spans) {
      if (!s.ir->has_collective()) {
        EXPECT_EQ(s.end.count(), s.rank == 11 ? slowed : c) << "rank " << s.rank;
        continue;
      }
      EXPECT_EQ(s.start.count() - c, slowed - c) << "rank " << s.rank << " f " << f;
      EXPECT_EQ(s.end.count(), slowed + d);
    }
    EXPECT_EQ(end_of(p, &one, /*fold=*/true).count(), slowed + d) << "fold takes the slowest member, f " << f;
  }
}

// Property: on random Megatron-shaped programs (with host costs), raising
// any one rank's compute factor never makes the iteration shorter, and a
// factor of 1 reproduces the run.
TEST(Perturbation, SlowingAnyRankNeverShortensTheIteration) {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    std::mt19937_64 rng(seed);
    const PipelineSpec spec = testing::random_pipeline_spec(rng, seed, 3);
    ir::Program p = testing::make_pipeline_program(spec);
    if (rng() % 2 == 0) testing::add_random_host_costs(p, seed, 3000, 5);
    const TimeNs base = end_of(p, nullptr);
    TablePerturbation previous;
    TimeNs previous_end = base;
    const auto rank = static_cast<int32_t>(rng() % static_cast<uint64_t>(p.ranks_size()));
    for (double f : {1.0, 1.001, 1.05, 1.3, 3.0}) {
      TablePerturbation slower;
      slower.rank_factor[rank] = f;
      const TimeNs end = end_of(p, &slower);
      if (f == 1.0) EXPECT_EQ(end, base) << "seed " << seed;
      EXPECT_GE(end, previous_end) << "seed " << seed << " rank " << rank << " factor " << f;
      previous_end = end;
    }
    // Per-op slowdowns too: every op of the rank with its own factor ≥ 1.
    TablePerturbation noisy;
    noisy.op_factor = [rank, seed](const OpRef& op) {
      if (op.rank != rank) return 1.0;
      return 1.0 + static_cast<double>((op.op * 7 + op.stream * 13 + static_cast<int>(seed)) % 10) / 20.0;
    };
    EXPECT_GE(end_of(p, &noisy), base) << "seed " << seed;
  }
}

// A pause stalls the host: hidden while the host runs ahead of the GPU, seen
// when it does not. A launch skew delays the op after its stream reached it
// even when the host ran ahead.
TEST(Perturbation, HostPauseHidesBehindARunningHostLaunchSkewDoesNot) {
  ir::Program p;
  ir::RankClass* c = testing::add_class(p, "r", 0, {"compute"});
  testing::add_compute(c->mutable_streams(0), 10'000).set_host_ns(100);
  testing::add_compute(c->mutable_streams(0), 10'000).set_host_ns(100);
  testing::add_rank(p, 0);
  // Host issues op 1 at 200, long before op 0 ends at 10,100.
  TablePerturbation pause;
  pause.delay = [](const OpRef& op) { return op.op == 1 ? HostDelay{5'000, 0} : HostDelay{}; };
  EXPECT_EQ(end_of(p, &pause).count(), 100 + 20'000) << "a 5 µs pause behind a 10 µs kernel is hidden";
  pause.delay = [](const OpRef& op) { return op.op == 1 ? HostDelay{50'000, 0} : HostDelay{}; };
  EXPECT_EQ(end_of(p, &pause).count(), 200 + 50'000 + 10'000) << "a long pause is exposed: issue at 200 + 50,000";
  TablePerturbation skew;
  skew.delay = [](const OpRef& op) { return op.op == 1 ? HostDelay{0, 3'000} : HostDelay{}; };
  EXPECT_EQ(end_of(p, &skew).count(), 100 + 10'000 + 3'000 + 10'000) << "skew counts from when the stream got there";
}

// Skew on a collective: the group starts at the latest member's reach + skew.
TEST(Perturbation, LaunchSkewOnACollectiveDelaysTheWholeGroup) {
  const ir::Program p = dp_group(4, 1000, 500);
  TablePerturbation skew;
  skew.delay = [](const OpRef& op) {
    return op.ir->has_collective() ? HostDelay{0, 100 * (op.rank + 1)} : HostDelay{};
  };
  EXPECT_EQ(end_of(p, &skew).count(), 1000 + 400 + 500);
}

TEST(Perturbation, FoldRefusesPerOpHooksAndTakesTheSlowestMember) {
  PipelineSpec spec;
  ir::Program p = testing::make_pipeline_program(spec);
  TablePerturbation noisy;
  noisy.op_factor = [](const OpRef&) { return 1.01; };
  ClosedFormCost cost;
  try {
    Simulator sim(p, cost, SimulationOptions{.fold = true, .perturbation = &noisy});
    FAIL() << "fold accepted per-op variability";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("`fold`"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("per-op"), std::string::npos) << e.what();
  }
  // One slow rank per stage class, somewhere in each DP replica: the folded
  // run (one pipeline) runs each stage at its slowest member's factor. With
  // one slow rank in the whole job, fold equals the full run exactly.
  TablePerturbation one;
  one.rank_factor[testing::pipeline_rank(spec, 1, 1, 2)] = 1.37;
  EXPECT_EQ(end_of(p, &one, true), end_of(p, &one, false));
  RecordingObserver obs;
  Simulator folded(p, cost, SimulationOptions{.fold = true, .perturbation = &one});
  folded.add_observer(&obs);
  folded.run();
  EXPECT_LT(obs.simulated.size(), static_cast<size_t>(p.ranks_size()));
}

TEST(Perturbation, BadFactorsAreErrors) {
  const ir::Program p = dp_group(2, 1000, 500);
  ClosedFormCost cost;
  TablePerturbation zero;
  zero.rank_factor[0] = 0.0;
  EXPECT_THROW(Simulator(p, cost, SimulationOptions{.perturbation = &zero}), Error);
  TablePerturbation nan;
  nan.op_factor = [](const OpRef&) { return std::nan(""); };
  Simulator sim(p, cost, SimulationOptions{.perturbation = &nan});
  EXPECT_THROW(sim.run(), Error);
}

}  // namespace
}  // namespace lacuna::engine
