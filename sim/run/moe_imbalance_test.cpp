// MoE load imbalance on the engine (docs/moe.md#load-imbalance): a hand-built
// MoE program (Helper-free: dense kernel, routed-expert kernel, combine on the
// EP stream) run through make_perturbation, the simulator and the bubble
// accounting. Checks: balanced routing adds nothing and shows no
// moe_imbalance; an imbalanced layer never finishes before the balanced one
// (property over seeds and concentrations); each rank's moe_imbalance is
// exactly its wait for the busiest rank's experts; the same seed gives
// identical spans; a folded run moves at the busiest member's pace.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <vector>

#include "sim/engine/engine_test_support.h"
#include "sim/engine/simulator.h"
#include "sim/report/observers/bubble_accounting.h"
#include "sim/run/variability_setup.h"
#include "sim/variability/moe_load.h"

namespace lacuna::run {
namespace {

using engine::Simulator;
using engine::SimulationOptions;
using engine::testing::ClosedFormCost;
using engine::testing::RecordingObserver;
using report::Bubble;

constexpr int64_t kDenseNs = 1000;
constexpr int64_t kExpertNs = 50000;
constexpr int64_t kCombineNs = 3000;

struct Shape {
  int32_t ep = 4;
  int32_t replicas = 1;  // EP groups
  int32_t experts = 16;
  int32_t top_k = 2;
  int32_t layers = 3;
  int32_t microbatches = 2;
  double alpha = 1.0;  // 0: balanced routing
  uint64_t seed = 0;
};

// Every rank, per (microbatch, layer): a dense kernel, the routed experts'
// FC1, then the combine all-to-all over its EP group on the EP stream, which
// the compute stream waits for.
ir::Program moe_program(const Shape& s) {
  ir::Program p;
  ir::Slot* slot = p.add_group_slots();
  slot->set_name("ep");
  slot->set_kind(ir::EP);
  const int32_t passes = s.layers * s.microbatches;
  ir::RankClass* c = engine::testing::add_class(p, "r", 2 * passes, {"compute", "ep"});
  c->mutable_streams(0)->set_kind(ir::COMPUTE);
  c->mutable_streams(1)->set_kind(ir::EP_COMM);
  int32_t k = 0;
  for (int32_t mb = 0; mb < s.microbatches; ++mb) {
    for (int32_t layer = 0; layer < s.layers; ++layer, ++k) {
      ir::Stream* compute = c->mutable_streams(0);
      ir::Stream* ep = c->mutable_streams(1);
      for (ir::Op* op : {&engine::testing::add_compute(compute, kDenseNs), &engine::testing::add_compute(compute, kExpertNs)}) {
        op->set_phase(ir::FORWARD);
        op->set_layer(layer);
        op->set_microbatch(mb);
      }
      compute->mutable_ops(compute->ops_size() - 1)->mutable_compute()->set_role(ir::ROLE_EXPERT_FC1);
      engine::testing::add_record(compute, 2 * k);
      engine::testing::add_wait(compute, 2 * k + 1, 1);
      engine::testing::add_wait(ep, 2 * k, 1);
      engine::testing::add_collective(ep, ir::ALL_TO_ALL, 0, 1 << 20, kCombineNs).set_layer(layer);
      engine::testing::add_record(ep, 2 * k + 1);
    }
  }
  for (int32_t d = 0; d < s.replicas; ++d) {
    std::vector<int32_t> members;
    for (int32_t i = 0; i < s.ep; ++i) members.push_back(d * s.ep + i);
    engine::testing::add_group(p, ir::EP, members);
  }
  for (int32_t r = 0; r < s.ep * s.replicas; ++r) {
    ir::RankBinding* b = engine::testing::add_rank(p, 0, {r / s.ep}, {}, r / 8);
    b->set_local_gpu(r % 8);
  }
  p.mutable_cluster()->set_num_nodes((s.ep * s.replicas + 7) / 8);
  p.mutable_cluster()->set_gpus_per_node(8);
  ir::MoeInfo* moe = p.mutable_info()->mutable_moe();
  moe->set_num_experts(s.experts);
  moe->set_ep(s.ep);
  moe->set_expert_tp(1);
  moe->set_top_k(s.top_k);
  moe->set_tokens_per_microbatch(1024);
  moe->mutable_routing()->set_distribution(s.alpha > 0 ? scenario::ROUTING_DIRICHLET_MULTINOMIAL
                                                       : scenario::ROUTING_BALANCED);
  moe->mutable_routing()->set_dirichlet_alpha(s.alpha);
  p.mutable_variability()->set_seed(static_cast<int64_t>(s.seed));
  return p;
}

struct Outcome {
  TimeNs end;
  std::vector<engine::OpSpan> spans;
  std::map<uint64_t, TimeNs> combine_end;  // by (group, seq): the layer's finish
  std::vector<report::RankAccount> accounts;
};

Outcome simulate_moe(const ir::Program& p, bool fold = false) {
  const auto perturbation = make_perturbation(p, fold);
  ClosedFormCost cost;
  Simulator sim(p, cost, SimulationOptions{.fold = fold, .perturbation = perturbation.get()});
  RecordingObserver obs;
  report::BubbleAccounting bubbles;
  sim.add_observer(&obs);
  sim.add_observer(&bubbles);
  Outcome out;
  out.end = sim.run().end_time;
  out.spans = obs.spans;
  for (const auto& c : obs.collectives) out.combine_end[uint64_t(c.group) << 32 | c.seq] = c.members.back().end;
  out.accounts = bubbles.ranks();
  return out;
}

TEST(MoeImbalance, BalancedRoutingAddsNothingAndShowsNoImbalanceBubble) {
  Shape s;
  s.alpha = 0;
  const ir::Program p = moe_program(s);
  EXPECT_EQ(make_perturbation(p, false), nullptr);  // nothing varies: the ideal event loop
  const Outcome r = simulate_moe(p);
  const int64_t passes = s.layers * s.microbatches;
  EXPECT_EQ(r.end.count(), passes * (kDenseNs + kExpertNs + kCombineNs));
  for (const report::RankAccount& a : r.accounts) {
    EXPECT_EQ(a.bubble(Bubble::kMoeImbalance).count(), 0);
    EXPECT_EQ(a.bubble(Bubble::kEpExposed).count(), passes * kCombineNs);  // the combine's transfer
    EXPECT_EQ(a.idle() + a.busy, r.end);
  }
}

// Every rank's moe_imbalance is exactly, pass by pass, how long its combine
// waited for the busiest rank's experts: Σ (max_r round(C·f_r) − round(C·f_own)).
TEST(MoeImbalance, EachRankWaitsForTheBusiestExpertsAsMoeImbalance) {
  Shape s;
  s.alpha = 0.5;
  s.seed = 17;
  const ir::Program p = moe_program(s);
  const variability::MoeLoad load(p.info().moe(), s.seed);
  ASSERT_TRUE(load.varies());
  const Outcome r = simulate_moe(p);
  std::vector<int64_t> expected(static_cast<size_t>(s.ep), 0);
  int64_t end = 0;
  for (int32_t mb = 0; mb < s.microbatches; ++mb) {
    for (int32_t layer = 0; layer < s.layers; ++layer) {
      std::vector<int64_t> t;
      for (double f : load.rank_factors(layer, mb, 0)) t.push_back(std::llround(static_cast<double>(kExpertNs) * f));
      const int64_t slowest = *std::max_element(t.begin(), t.end());
      for (int32_t e = 0; e < s.ep; ++e) expected[static_cast<size_t>(e)] += slowest - t[static_cast<size_t>(e)];
      end += kDenseNs + slowest + kCombineNs;
    }
  }
  EXPECT_EQ(r.end.count(), end);
  int64_t total = 0;
  for (const report::RankAccount& a : r.accounts) {
    EXPECT_EQ(a.bubble(Bubble::kMoeImbalance).count(), expected[static_cast<size_t>(a.rank)]) << a.rank;
    EXPECT_EQ(a.bubble(Bubble::kEpExposed).count(), s.layers * s.microbatches * kCombineNs);
    EXPECT_EQ(a.idle() + a.busy, r.end);
    total += a.bubble(Bubble::kMoeImbalance).count();
  }
  EXPECT_GT(total, 0);
}

// Property: with imbalance (no token dropping), no layer's combine ends
// before it does under balanced routing, over random seeds and
// concentrations, and the iteration is never shorter.
TEST(MoeImbalance, ImbalanceNeverSpeedsUpALayer) {
  std::mt19937_64 rng(2026);
  for (int trial = 0; trial < 25; ++trial) {
    Shape s;
    s.ep = 1 << (1 + rng() % 3);          // 2, 4, 8
    s.experts = s.ep * (1 + static_cast<int32_t>(rng() % 4));
    s.top_k = 1 + static_cast<int32_t>(rng() % std::min(4, s.experts));
    s.replicas = 1 + static_cast<int32_t>(rng() % 2);
    s.seed = rng();
    s.alpha = std::exp(std::uniform_real_distribution<double>(std::log(0.05), std::log(200.0))(rng));
    Shape balanced = s;
    balanced.alpha = 0;
    const Outcome imb = simulate_moe(moe_program(s));
    const Outcome bal = simulate_moe(moe_program(balanced));
    ASSERT_EQ(imb.combine_end.size(), bal.combine_end.size());
    for (const auto& [key, t] : bal.combine_end) {
      EXPECT_GE(imb.combine_end.at(key), t) << "trial " << trial << " alpha " << s.alpha;
    }
    EXPECT_GE(imb.end, bal.end);
  }
}

TEST(MoeImbalance, SameSeedGivesIdenticalSpansAndAnotherSeedDiffers) {
  Shape s;
  s.alpha = 1.0;
  s.seed = 5;
  const Outcome a = simulate_moe(moe_program(s));
  const Outcome b = simulate_moe(moe_program(s));
  ASSERT_EQ(a.spans.size(), b.spans.size());
  for (size_t i = 0; i < a.spans.size(); ++i) {
    ASSERT_EQ(a.spans[i].start, b.spans[i].start) << i;
    ASSERT_EQ(a.spans[i].end, b.spans[i].end) << i;
  }
  s.seed = 6;
  EXPECT_NE(simulate_moe(moe_program(s)).end, a.end);
}

// Fold: all ranks share one class, so one representative is simulated; it
// computes at its busiest member's load and the iteration equals the
// full-rank one (every EP group waits for its busiest rank at the combine).
TEST(MoeImbalance, FoldedRunMovesAtTheBusiestMembersPace) {
  for (uint64_t seed : {1u, 2u, 3u}) {
    Shape s;
    s.replicas = 2;
    s.alpha = 0.3;
    s.seed = seed;
    const ir::Program p = moe_program(s);
    const Outcome full = simulate_moe(p);
    const Outcome folded = simulate_moe(p, true);
    EXPECT_EQ(folded.accounts.size(), 1u);
    EXPECT_EQ(folded.end, full.end) << seed;
  }
}

}  // namespace
}  // namespace lacuna::run
