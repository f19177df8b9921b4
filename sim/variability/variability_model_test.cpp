// The variability model (variability_model.h) on the engine: draws keyed on
// coordinates, so the same seed gives the same answers in any query order;
// a model whose sources are all neutral changes no span; the simulated
// growth of the expected maximum of N slow GPUs follows the order-statistics
// formula for the log-normal; one drawn straggler host delays its DP group's
// reduce-scatter by exactly its extra compute; slowing ranks through the
// model never shortens the iteration; fold refuses per-op sources.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <vector>

#include "sim/core/distributions.h"
#include "sim/core/error.h"
#include "sim/engine/pipeline_program.h"
#include "sim/engine/simulator.h"
#include "sim/variability/variability_model.h"

namespace lacuna::variability {
namespace {

using engine::OpRef;
using engine::OpSpan;
using engine::Simulator;
using engine::SimulationOptions;
using engine::testing::ClosedFormCost;
using engine::testing::RecordingObserver;

constexpr int32_t kGpusPerNode = 8;

// Binds rank r to node r / 8, local GPU r % 8, and sizes the cluster.
void place_ranks(ir::Program& p) {
  for (int r = 0; r < p.ranks_size(); ++r) {
    p.mutable_ranks(r)->set_node(r / kGpusPerNode);
    p.mutable_ranks(r)->set_local_gpu(r % kGpusPerNode);
  }
  p.mutable_cluster()->set_num_nodes((p.ranks_size() + kGpusPerNode - 1) / kGpusPerNode);
  p.mutable_cluster()->set_gpus_per_node(kGpusPerNode);
}

// N ranks, each: compute C, then a reduce-scatter over all of them taking a
// fixed D. The collective starts when the last member arrives, so the
// iteration is round(C · max factor) + D.
ir::Program barrier_program(int32_t n, int64_t compute_ns, int64_t rs_ns) {
  ir::Program p;
  p.add_group_slots()->set_name("dp");
  ir::RankClass* c = engine::testing::add_class(p, "r", 0, {"compute"});
  engine::testing::add_compute(c->mutable_streams(0), compute_ns).set_phase(ir::FORWARD);
  engine::testing::add_collective(c->mutable_streams(0), ir::REDUCE_SCATTER, 0, 1 << 20, rs_ns);
  std::vector<int32_t> all(static_cast<size_t>(n));
  for (int32_t r = 0; r < n; ++r) all[static_cast<size_t>(r)] = r;
  const int32_t g = engine::testing::add_group(p, ir::DP, all);
  for (int32_t r = 0; r < n; ++r) engine::testing::add_rank(p, 0, {g}, {}, 0);
  place_ranks(p);
  return p;
}

// A pipeline program with passes: the first half of each compute stream's
// kernels forward, the rest backward, microbatches cycling.
ir::Program pipeline(uint64_t seed) {
  engine::testing::PipelineSpec spec;
  spec.seed = seed;
  spec.fixed_comm = true;
  ir::Program p = engine::testing::make_pipeline_program(spec);
  for (auto& cls : *p.mutable_classes()) {
    for (auto& s : *cls.mutable_streams()) {
      const int n = s.ops_size();
      for (int o = 0; o < n; ++o) {
        ir::Op* op = s.mutable_ops(o);
        op->set_phase(o < n / 2 ? ir::FORWARD : ir::BACKWARD_INPUT);
        op->set_microbatch(o % 4);
      }
    }
  }
  place_ranks(p);
  return p;
}

scenario::Variability every_source(int64_t seed) {
  scenario::Variability v;
  v.set_seed(seed);
  v.set_gpu_speed_cv(0.02);
  v.mutable_stragglers()->set_host_fraction(0.3);
  v.mutable_stragglers()->set_slowdown(1.1);
  scenario::KernelNoise& n = (*v.mutable_kernel_noise())["DEFAULT"];
  n.set_cv(0.05);
  n.set_tail_probability(0.1);
  n.set_tail_alpha(2.0);
  n.set_tail_max_factor(3.0);
  v.mutable_host_pauses()->set_interval_iterations(1);
  v.mutable_host_pauses()->set_duration_ms(0.01);
  v.set_collective_launch_skew_us(3.0);
  return v;
}

std::vector<OpSpan> spans_of(const ir::Program& p, const engine::Perturbation* perturbation, bool fold = false) {
  ClosedFormCost cost;
  Simulator sim(p, cost, SimulationOptions{.fold = fold, .perturbation = perturbation});
  RecordingObserver obs;
  sim.add_observer(&obs);
  sim.run();
  return obs.spans;
}

TimeNs end_of(const ir::Program& p, const engine::Perturbation* perturbation, bool fold = false) {
  ClosedFormCost cost;
  Simulator sim(p, cost, SimulationOptions{.fold = fold, .perturbation = perturbation});
  return sim.run().end_time;
}

bool same_spans(const std::vector<OpSpan>& a, const std::vector<OpSpan>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].rank != b[i].rank || a[i].stream != b[i].stream || a[i].op != b[i].op || a[i].ready != b[i].ready ||
        a[i].issued != b[i].issued || a[i].start != b[i].start || a[i].end != b[i].end) {
      return false;
    }
  }
  return true;
}

// Every (rank, stream, op, iteration) of a program, for querying the model.
std::vector<OpRef> coordinates_of(const ir::Program& p, uint32_t iterations) {
  std::vector<OpRef> refs;
  for (int32_t r = 0; r < p.ranks_size(); ++r) {
    const ir::RankClass& cls = p.classes(p.ranks(r).class_id());
    for (int32_t s = 0; s < cls.streams_size(); ++s) {
      for (int32_t o = 0; o < cls.streams(s).ops_size(); ++o) {
        for (uint32_t it = 0; it < iterations; ++it) refs.push_back(OpRef{r, s, o, it, &cls.streams(s).ops(o)});
      }
    }
  }
  return refs;
}

struct Answer {
  double rank_factor = 0;
  double compute = 0;
  int64_t pause = 0;
  int64_t skew = 0;
  bool operator==(const Answer&) const = default;
};

Answer ask(const VariabilityModel& m, const OpRef& ref) {
  Answer a;
  a.rank_factor = m.rank_compute_factor(ref.rank);
  const ir::StreamKind kind = ir::COMPUTE;
  if ((m.perturbs(*ref.ir, kind) & engine::kPerturbCompute) != 0) a.compute = m.compute_factor(ref);
  const engine::HostDelay d = m.host_delay(ref);
  a.pause = d.pause_ns;
  a.skew = d.skew_ns;
  return a;
}

// (d) A fixed seed gives identical draws whatever order they are asked in
// (forward, reversed, shuffled, from a fresh model), and a different seed
// gives different ones: every value is a function of its key, not of a
// generator's state.
TEST(VariabilityModel, FixedSeedGivesTheSameDrawsInAnyQueryOrder) {
  const ir::Program p = pipeline(3);
  for (scenario::NoiseScope scope : {scenario::NOISE_PER_PASS, scenario::NOISE_PER_KERNEL}) {
    scenario::Variability v = every_source(42);
    v.set_kernel_noise_scope(scope);
    const std::vector<OpRef> refs = coordinates_of(p, 3);
    const VariabilityModel forward_model(p, v);
    std::vector<Answer> forward;
    for (const OpRef& r : refs) forward.push_back(ask(forward_model, r));

    std::vector<size_t> order(refs.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::mt19937_64 shuffle_rng(9);
    std::shuffle(order.begin(), order.end(), shuffle_rng);
    const VariabilityModel shuffled_model(p, v);
    std::vector<Answer> shuffled(refs.size());
    for (size_t i : order) shuffled[i] = ask(shuffled_model, refs[i]);
    // Asked twice, and in reverse, on the first model.
    for (size_t i = refs.size(); i-- > 0;) ASSERT_EQ(ask(forward_model, refs[i]), forward[i]) << i;
    ASSERT_EQ(shuffled, forward);

    // The draws vary (the comparison above could fail) and depend on the seed.
    std::set<double> distinct;
    size_t noisy = 0;
    for (const Answer& a : forward) {
      if (a.compute == 0) continue;  // not a compute op
      distinct.insert(a.compute);
      ++noisy;
    }
    EXPECT_GT(noisy, 100u);
    EXPECT_GT(distinct.size(), noisy / 4);
    const VariabilityModel other(p, every_source(43));
    size_t differ = 0;
    for (size_t i = 0; i < refs.size(); ++i) differ += !(ask(other, refs[i]) == forward[i]);
    EXPECT_GT(differ, refs.size() / 2);
  }
}

// The same seed gives byte-identical spans run after run; another seed does
// not.
TEST(VariabilityModel, FixedSeedGivesIdenticalRuns) {
  const ir::Program p = pipeline(5);
  scenario::Variability v = every_source(7);
  v.clear_host_pauses();  // pauses are per-op too; keep them off so kernel noise shows alone
  const VariabilityModel a(p, v);
  const VariabilityModel b(p, v);
  const std::vector<OpSpan> first = spans_of(p, &a);
  EXPECT_TRUE(same_spans(first, spans_of(p, &b)));
  EXPECT_TRUE(same_spans(first, spans_of(p, &a)));
  const VariabilityModel c(p, every_source(8));
  EXPECT_FALSE(same_spans(first, spans_of(p, &c)));
  EXPECT_FALSE(same_spans(first, spans_of(p, nullptr)));
}

// A model whose every source is neutral (present, but at factor 1 and zero
// delay) changes no span: variability off is the run without perturbation.
TEST(VariabilityModel, NeutralSourcesGiveTheUnperturbedRun) {
  const ir::Program p = pipeline(2);
  scenario::Variability v;
  v.set_seed(5);
  v.set_gpu_speed_cv(0);
  scenario::StragglerHost* h = v.mutable_stragglers()->add_hosts();
  h->set_node(0);
  h->set_factor(1.0);
  (*v.mutable_kernel_noise())["DEFAULT"].set_cv(0);
  v.set_collective_launch_skew_us(0);
  const VariabilityModel neutral(p, v);
  EXPECT_EQ(neutral.slowest_factor(), 1.0);
  EXPECT_TRUE(same_spans(spans_of(p, nullptr), spans_of(p, &neutral)));
  EXPECT_EQ(end_of(p, nullptr, true), end_of(p, &neutral, true));
  // The same section with a real straggler does change the run.
  h->set_factor(1.25);
  const VariabilityModel slow(p, v);
  EXPECT_GT(end_of(p, &slow), end_of(p, nullptr));
}

// (c) N GPUs with log-normal speed factors (mean 1, CV 5 %) meet at a
// barrier-like collective: the simulated compute phase ends at round(C · max
// of N draws). Its mean over many seeds matches E[max] = ∫ x d(F(x)^N)
// (distributions.h, expected_max) within 4 standard errors, for N from 1 to
// 1024, and it grows with N as the formula does.
TEST(VariabilityModel, ExpectedMaximumGrowsWithNLikeTheOrderStatistic) {
  constexpr double kCv = 0.05;
  constexpr int64_t kCompute = 1'000'000'000;  // 1 s: rounding to ns is 1e-9 relative
  constexpr int64_t kCollective = 10'000;
  constexpr int kSeeds = 300;
  const LogNormalMean1 dist(kCv);
  double previous = 0;
  for (int32_t n : {1, 2, 8, 64, 256, 1024}) {
    const ir::Program p = barrier_program(n, kCompute, kCollective);
    double sum = 0;
    double sum_sq = 0;
    for (int s = 0; s < kSeeds; ++s) {
      scenario::Variability v;
      v.set_seed(1000 + s);
      v.set_gpu_speed_cv(kCv);
      const VariabilityModel model(p, v);
      const TimeNs end = end_of(p, &model);
      // Exactly the slowest rank's compute, then the collective.
      ASSERT_EQ(end.count(), std::llround(static_cast<double>(kCompute) * model.slowest_factor()) + kCollective)
          << "n " << n << " seed " << s;
      const double m = static_cast<double>(end.count() - kCollective) / static_cast<double>(kCompute);
      sum += m;
      sum_sq += m * m;
    }
    const double mean = sum / kSeeds;
    const double sd = std::sqrt(std::max(0.0, sum_sq / kSeeds - mean * mean) * kSeeds / (kSeeds - 1));
    const double expected = expected_max([&](double x) { return dist.cdf(x); }, n, 3.0, 60000);
    const double bound = 4 * sd / std::sqrt(static_cast<double>(kSeeds));
    EXPECT_NEAR(mean, expected, bound) << "N = " << n << ": simulated mean of max " << mean << ", formula "
                                       << expected << ", sd " << sd;
    if (n == 1) {
      EXPECT_NEAR(expected, 1.0, 1e-6);  // mean-1 log-normal
    }
    EXPECT_GT(mean, previous) << "N = " << n;
    previous = mean;
  }
  // At 1024 GPUs the slowest is about 3.2 σ out: far from the mean of 1.
  EXPECT_GT(previous, 1.0 + 2.5 * kCv);
}

// (b) One drawn straggler host in a DP group delays the group's
// reduce-scatter by exactly the closed-form amount: its ranks' compute takes
// round(C · slowdown), the collective starts round(C · slowdown) − C later.
TEST(VariabilityModel, OneStragglerHostDelaysItsDpReduceScatterByItsExtraCompute) {
  constexpr int64_t kCompute = 2'345'678;
  constexpr int64_t kCollective = 40'000;
  const ir::Program p = barrier_program(32, kCompute, kCollective);  // 4 nodes
  for (double slowdown : {1.001, 1.10, 1.5}) {
    scenario::Variability v;
    v.set_gpu_speed_cv(0);
    scenario::StragglerHost* h = v.mutable_stragglers()->add_hosts();
    h->set_node(2);
    h->set_factor(slowdown);
    const VariabilityModel model(p, v);
    EXPECT_EQ(model.straggler_hosts(), 1);
    const int64_t slowed = std::llround(static_cast<double>(kCompute) * slowdown);
    for (const OpSpan& s : spans_of(p, &model)) {
      const bool on_straggler = s.rank / kGpusPerNode == 2;
      if (s.ir->has_compute()) {
        EXPECT_EQ(s.end.count(), on_straggler ? slowed : kCompute) << "rank " << s.rank;
      } else {
        EXPECT_EQ(s.start.count() - kCompute, slowed - kCompute) << "rank " << s.rank << " slowdown " << slowdown;
        EXPECT_EQ(s.end.count(), slowed + kCollective);
      }
    }
    EXPECT_EQ(end_of(p, &model, /*fold=*/true).count(), slowed + kCollective) << "fold: the slowest member";
  }
}

// (a) Property over random programs (random TP, PP, DP, microbatches,
// layers, host costs): on top of a seeded GPU spread, making any host slower
// (a random host, a random slowdown ≥ 1, again and again) never shortens the
// iteration.
TEST(VariabilityModel, SlowingAnyRankNeverShortensTheIteration) {
  for (uint64_t seed = 1; seed <= 25; ++seed) {
    std::mt19937_64 rng(seed);
    const engine::testing::PipelineSpec spec = engine::testing::random_pipeline_spec(rng, seed, 3);
    ir::Program p = engine::testing::make_pipeline_program(spec);
    if (rng() % 2 == 0) engine::testing::add_random_host_costs(p, seed, 3000, 5);
    place_ranks(p);
    const int32_t nodes = static_cast<int32_t>(p.cluster().num_nodes());
    scenario::Variability v;
    v.set_seed(static_cast<int64_t>(seed));
    v.set_gpu_speed_cv(0.03);
    const VariabilityModel base_model(p, v);
    TimeNs previous = end_of(p, &base_model);
    // Add straggler hosts one after another; a host named again gets a
    // factor at least its previous one (a later entry replaces an earlier).
    std::vector<double> host_factor(static_cast<size_t>(nodes), 1.0);
    for (int k = 0; k < 4; ++k) {
      const auto node = static_cast<size_t>(rng() % static_cast<uint64_t>(nodes));
      host_factor[node] *= 1.0 + static_cast<double>(rng() % 1000) / 500.0;
      scenario::StragglerHost* h = v.mutable_stragglers()->add_hosts();
      h->set_node(static_cast<int64_t>(node));
      h->set_factor(host_factor[node]);
      const VariabilityModel slower(p, v);
      const TimeNs end = end_of(p, &slower);
      EXPECT_GE(end, previous) << "seed " << seed << " straggler " << k;
      previous = end;
    }
  }
}

// Fold keeps per-rank sources (the class at its slowest member's pace) and
// refuses per-op ones with a message naming --fold.
TEST(VariabilityModel, FoldRefusesPerOpSourcesNamingFold) {
  scenario::Variability per_rank;
  per_rank.set_gpu_speed_cv(0.01);
  EXPECT_EQ(fold_refusal(per_rank), "");
  scenario::Variability noisy = per_rank;
  (*noisy.mutable_kernel_noise())["GEMM"].set_cv(0.02);
  EXPECT_NE(fold_refusal(noisy).find("kernel noise"), std::string::npos);
  noisy.set_collective_launch_skew_us(2);
  EXPECT_NE(fold_refusal(noisy).find("launch skew"), std::string::npos);

  const ir::Program p = pipeline(4);
  const VariabilityModel model(p, noisy);
  ClosedFormCost cost;
  try {
    Simulator sim(p, cost, SimulationOptions{.fold = true, .perturbation = &model});
    FAIL() << "fold accepted kernel noise";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("`fold`"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lacuna::variability
