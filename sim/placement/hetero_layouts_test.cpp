// The heterogeneous layouts lacuna derives (hetero_layouts.h): the colocated
// search equals brute force and never picks a layout over HBM, island sizing
// picks the smallest island that keeps up with the LLM, free encoder work
// gives the LLM's iteration, and what cannot be built is a located error.
#include "sim/placement/hetero_layouts.h"

#include <gtest/gtest.h>

#include <cmath>
#include <optional>

#include "sim/core/error.h"
#include "sim/cost/memory_peak.h"
#include "sim/engine/simulator.h"
#include "sim/placement/compile.h"
#include "sim/placement/hetero_test_support.h"
#include "sim/placement/modules.h"

namespace lacuna::placement {
namespace {

using compiler::testing::Small;
using compiler::testing::TrivialCost;
using testing::EncoderSpec;
using testing::make_mllm;

// Kernel time proportional to FLOPs (1 ns per 10^5 FLOP): an encoder's work
// then splits exactly over its data-parallel shards.
class FlopCost : public TrivialCost {
 public:
  TimeNs compute(const ir::Compute& op) const override { return TimeNs(static_cast<int64_t>(op.flops() / 1e5)); }
};

scenario::LoadedScenario without_layouts(scenario::LoadedScenario s) {
  for (auto& e : *s.spec.mutable_model()->mutable_encoders()) e.clear_layout();
  return s;
}

// LLM TP2 PP2 DP2 on 8 GPUs, replicas contiguous (tp-cp-pp-dp), so that
// fan-in, equal DP and fan-out encoder layouts all can be built.
Small llm_8() {
  Small s;
  s.rank_order = "tp-cp-pp-dp";
  return s;
}

int64_t full_sim_ns(const ir::Program& p, const cost::CostModel& cost) {
  return engine::Simulator(p, cost).run().end_time.count();
}

void set_capacity(scenario::LoadedScenario& s, int64_t bytes) {
  s.spec.mutable_cluster()->mutable_gpu()->set_hbm_capacity_gib(static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
}

TEST(HeteroLayouts, ColocatedSearchEqualsBruteForce) {
  const TrivialCost cost;
  const auto sc = without_layouts(make_mllm(llm_8(), {EncoderSpec{}}));
  const HeteroChoice choice = choose_heterogeneous(sc, HeteroMode::kColocated, cost);
  EXPECT_TRUE(choice.derived);
  EXPECT_GE(choice.candidates, 3);
  // Brute force: every PP dividing the LLM's and TP dividing the world and
  // the heads, DP = world / (TP·PP), every recompute, compiled and simulated
  // rank by rank; the fastest that fits.
  std::optional<int64_t> best;
  int built = 0, staged = 0;
  for (int64_t pp = 1; pp <= 2; ++pp)
  for (int64_t tp = 1; tp * pp <= 8; tp *= 2) {
    for (auto rc : {scenario::RECOMPUTE_NONE, scenario::RECOMPUTE_SELECTIVE, scenario::RECOMPUTE_FULL}) {
      auto s = make_mllm(llm_8(), {EncoderSpec{}});
      auto* l = s.spec.mutable_model()->mutable_encoders(0)->mutable_layout();
      l->set_tp(tp);
      l->set_pp(pp);
      l->set_dp(8 / tp / pp);
      l->set_recompute(rc);
      ir::Program p;
      try {
        p = compile_as(s, scenario::HETEROGENEOUS, cost);
      } catch (const Error&) {
        continue;
      }
      ++built;
      staged += pp > 1;
      if (!cost::program_feasibility(p).fits()) continue;
      const int64_t t = full_sim_ns(p, cost);
      if (!best || t < *best) best = t;
    }
  }
  ASSERT_GE(built, 9);
  ASSERT_GE(staged, 3) << "the space must hold encoder pipelines";
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(full_sim_ns(choice.program, cost), *best);
}

TEST(HeteroLayouts, InfeasibleCandidatesAreNeverChosen) {
  const TrivialCost cost;
  EncoderSpec big;  // model state that TP and DP split differently
  big.hidden = 512;
  big.ffn = 2048;
  const auto sc = without_layouts(make_mllm(llm_8(), {big}));
  const HeteroChoice free_choice = choose_heterogeneous(sc, HeteroMode::kColocated, cost);
  const auto layout_of = [](int64_t tp, int64_t pp) { return std::pair{tp, pp}; };
  const auto winner = layout_of(free_choice.program.info().modules(1).tp(), free_choice.program.info().modules(1).pp());
  // Each candidate's peak at full recompute of every layer (the least it can hold).
  int64_t winner_peak = 0;
  std::optional<int64_t> other_peak;
  for (const auto& cand : colocated_candidates(sc, 0)) {
    auto s = sc;
    auto l = cand;
    l.set_recompute(scenario::RECOMPUTE_FULL);
    *s.spec.mutable_model()->mutable_encoders(0)->mutable_layout() = l;
    s.spec.mutable_parallel()->set_recompute(scenario::RECOMPUTE_FULL);
    ir::Program p;
    try {
      p = compile_as(s, scenario::HETEROGENEOUS, cost);
    } catch (const Error&) {
      continue;
    }
    const int64_t peak = cost::program_feasibility(p).worst.peak.count();
    if (layout_of(cand.tp(), cand.pp()) == winner)
      winner_peak = peak;
    else if (!other_peak || peak < *other_peak)
      other_peak = peak;
  }
  ASSERT_TRUE(other_peak.has_value());
  ASSERT_LT(*other_peak + 4096, winner_peak) << "the case needs a candidate that holds less than the winner";
  auto tight = sc;
  set_capacity(tight, (*other_peak + winner_peak) / 2);
  const HeteroChoice c = choose_heterogeneous(tight, HeteroMode::kColocated, cost);
  EXPECT_TRUE(cost::program_feasibility(c.program).fits());
  EXPECT_NE(layout_of(c.program.info().modules(1).tp(), c.program.info().modules(1).pp()), winner);
  EXPECT_GE(c.pruned_by_memory, 1);
}

// LLM TP2 PP2 DP1 on 4 one-GPU nodes, 4 microbatches of 12 samples; an
// encoder island of n GPUs runs n shards of 12 / n samples per microbatch.
scenario::LoadedScenario island_case(int64_t encoder_layers) {
  Small llm;
  llm.dp = 1;
  llm.gpus_per_node = 1;
  llm.micro_batch = 12;
  llm.global_batch = 48;
  EncoderSpec e;
  e.layers = encoder_layers;
  e.hidden = 256;
  e.ffn = 1024;
  e.tokens_per_image = 96;
  e.images_per_sample = 1;
  return without_layouts(make_mllm(llm, {e}));
}

TEST(HeteroLayouts, IslandSizingPicksTheSmallestBalancedIsland) {
  const FlopCost cost;
  const auto sc = island_case(2);
  // By hand: with kernel time ∝ FLOPs the encoder's time per LLM microbatch
  // on an island of n GPUs (TP 1, DP n) is W / n, W its time on one GPU; the
  // LLM's is P. The smallest island that keeps up has n = ⌈W / P⌉ GPUs.
  const ir::Program alone = compile_as(llm_only(sc), scenario::MEGATRON_BASELINE, cost);
  const int64_t p_llm = module_period_ns(alone, 0, 4, cost);
  auto one = sc;
  auto l = island_candidates(sc, 0, 1, 4).front();
  *one.spec.mutable_model()->mutable_encoders(0)->mutable_layout() = l;
  one.spec.mutable_cluster()->set_num_nodes(5);
  const int64_t w = module_period_ns(compile_as(one, scenario::HETEROGENEOUS, cost), 1, 4, cost);
  const double ratio = static_cast<double>(w) / static_cast<double>(p_llm);
  ASSERT_GT(ratio, 1.2) << "the case must need more than one GPU";
  ASSERT_LT(ratio, 3.8) << "and fewer than the LLM's four";
  ASSERT_GT(std::abs(ratio - std::round(ratio)), 0.05) << "not too close to a whole island";
  const int64_t expected = static_cast<int64_t>(std::ceil(ratio));

  const HeteroChoice c = choose_heterogeneous(sc, HeteroMode::kNonColocated, cost);
  EXPECT_TRUE(c.derived);
  EXPECT_EQ(c.island_gpus, expected);
  EXPECT_EQ(c.program.ranks_size(), 4 + expected);
  EXPECT_EQ(c.cluster_nodes, 4 + expected);  // the cluster grows by the island's nodes
  EXPECT_EQ(c.llm_period_ns, p_llm);
  EXPECT_LE(c.island_period_ns, p_llm);
  EXPECT_NEAR(static_cast<double>(c.island_period_ns), static_cast<double>(w) / static_cast<double>(expected),
              0.01 * static_cast<double>(w));
}

TEST(HeteroLayouts, FreeEncoderWorkGivesTheLlmAlone) {
  const TrivialCost cost;
  const auto sc = without_layouts(make_mllm(llm_8(), {EncoderSpec{}}));
  const int64_t llm = full_sim_ns(compile_as(llm_only(sc), scenario::MEGATRON_BASELINE, cost), cost);
  for (HeteroMode mode : {HeteroMode::kColocated, HeteroMode::kNonColocated}) {
    SCOPED_TRACE(std::string(hetero_mode_name(mode)));
    HeteroChoice c = choose_heterogeneous(sc, mode, cost);
    testing::make_encoder_work_free(c.program);
    const int64_t het = full_sim_ns(c.program, cost);
    // Each encoder op takes 1 ns: the iteration grows by at most those on
    // the critical path.
    EXPECT_GE(het, llm);
    EXPECT_LE(het, llm + testing::ops_of_module_above_zero(c.program));
  }
}

TEST(HeteroLayouts, AnIslandTooSmallForTheEncoderNamesTheField) {
  const TrivialCost cost;
  EncoderSpec e;
  e.hidden = 1024;
  e.ffn = 4096;
  e.heads = 8;
  e.first_rank = 8;
  e.dp = 1;  // one GPU holds the whole encoder and the batch's activations
  auto sc = make_mllm(llm_8(), {e});
  // Capacity between the LLM's worst peak and the island's least (full recompute).
  auto full = sc;
  full.spec.mutable_model()->mutable_encoders(0)->mutable_layout()->set_recompute(scenario::RECOMPUTE_FULL);
  const ir::Program p = compile_as(full, scenario::HETEROGENEOUS, cost);
  int64_t llm_peak = 0, island_peak = 0;
  for (int32_t r = 0; r < p.ranks_size(); ++r) {
    const int64_t peak = cost::class_memory(p, p.ranks(r).class_id()).peak.count();
    (r < 8 ? llm_peak : island_peak) = std::max(r < 8 ? llm_peak : island_peak, peak);
  }
  ASSERT_LT(llm_peak + 4096, island_peak);
  set_capacity(sc, (llm_peak + island_peak) / 2);
  try {
    choose_heterogeneous(sc, HeteroMode::kNonColocated, cost);
    FAIL() << "expected an error";
  } catch (const Error& err) {
    EXPECT_EQ(err.where().field, "model.encoders[0].layout.dp");
    EXPECT_NE(err.problem().find("island of 1 GPUs"), std::string::npos) << err.problem();
  }
  // The colocated mode derives its own layout and still runs.
  EXPECT_NO_THROW(choose_heterogeneous(sc, HeteroMode::kColocated, cost));
}

}  // namespace
}  // namespace lacuna::placement
