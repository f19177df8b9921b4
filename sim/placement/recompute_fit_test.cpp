// The recompute search (docs/memory-model.md, "Choosing the recompute")
// against brute force: every combination of the modules' ladders compiled,
// its peak and its recompute time measured on its own program; for every HBM
// capacity between the lowest and the requested peak, the search must choose
// the first combination that fits in (cost, rungs) order.
#include "sim/placement/recompute_fit.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "sim/compiler/compiler_test_support.h"
#include "sim/cost/memory_peak.h"
#include "sim/placement/compile.h"
#include "sim/placement/hetero_test_support.h"

namespace lacuna::placement {
namespace {

using compiler::testing::Small;
using compiler::testing::SmallEncoder;

constexpr auto kNone = scenario::RECOMPUTE_NONE;
constexpr auto kSel = scenario::RECOMPUTE_SELECTIVE;
constexpr auto kFull = scenario::RECOMPUTE_FULL;

TEST(RecomputeLadder, RungsFromNoneToEveryLayer) {
  const std::vector<ModuleRecompute> want = {{kNone, 0}, {kSel, 0}, {kFull, 1}, {kFull, 2}, {kFull, 3}, {kFull, 0}};
  EXPECT_EQ(recompute_ladder(4), want);
  EXPECT_EQ(recompute_ladder(1), (std::vector<ModuleRecompute>{{kNone, 0}, {kSel, 0}, {kFull, 0}}));
  for (int32_t k = 0; k < static_cast<int32_t>(want.size()); ++k) EXPECT_EQ(ladder_position(want[k], 4), k);
  EXPECT_EQ(ladder_position({kFull, 4}, 4), 5);  // N ≥ the chunk's layers: every layer
  EXPECT_EQ(ladder_position({kFull, 9}, 4), 5);
}

TEST(RecomputeLadder, KeepsNoMore) {
  EXPECT_TRUE(keeps_no_more({kNone, 0}, {kSel, 0}));
  EXPECT_TRUE(keeps_no_more({kNone, 0}, {kFull, 2}));
  EXPECT_TRUE(keeps_no_more({kSel, 0}, {kFull, 0}));
  EXPECT_TRUE(keeps_no_more({kFull, 1}, {kFull, 3}));
  EXPECT_TRUE(keeps_no_more({kFull, 1}, {kFull, 0}));
  EXPECT_TRUE(keeps_no_more({kFull, 2}, {kFull, 2}));
  // Block recompute keeps A_none of its other layers, more than selective's
  // A_sel without FlashAttention.
  EXPECT_FALSE(keeps_no_more({kSel, 0}, {kFull, 2}));
  EXPECT_FALSE(keeps_no_more({kFull, 3}, {kFull, 1}));
  EXPECT_FALSE(keeps_no_more({kFull, 0}, {kFull, 3}));
  EXPECT_FALSE(keeps_no_more({kSel, 0}, {kNone, 0}));
}

void with_overheads(scenario::LoadedScenario& s) {
  auto* mo = s.spec.mutable_cluster()->mutable_memory_overheads();
  mo->set_cuda_context_gib(0.5);
  mo->set_nccl_communicator_mib(656);
  mo->set_allocator_fragmentation(0.15);
}

void set_capacity(scenario::LoadedScenario& s, int64_t bytes) {
  // bytes / 2^30 is exact in a double, and so is the way back.
  s.spec.mutable_cluster()->mutable_gpu()->set_hbm_capacity_gib(static_cast<double>(bytes) / 1073741824.0);
}

using Rungs = std::vector<int32_t>;

struct Combination {
  Rungs rungs;
  std::vector<ModuleRecompute> choice;
  int64_t cost = 0;  // Σ over modules of its recompute time in this program
  int64_t peak = 0;  // worst class
};

// Every combination of the modules' ladders from the requested rungs up.
std::vector<Combination> brute_force(const RecomputeRequest& request, const CompileWithRecompute& compile,
                                     const cost::CostModel& cost) {
  const ir::Program requested = compile(request.requested);
  const size_t n = request.requested.size();
  std::vector<std::vector<ModuleRecompute>> ladder(n);
  for (size_t m = 0; m < n; ++m) {
    ladder[m] = {request.requested[m]};
    if (!request.adjustable[m]) continue;
    const int64_t layers = max_chunk_layers(requested, static_cast<int32_t>(m));
    const auto full = recompute_ladder(layers);
    for (size_t k = static_cast<size_t>(ladder_position(request.requested[m], layers)) + 1; k < full.size(); ++k)
      ladder[m].push_back(full[k]);
  }
  std::vector<Combination> out;
  Rungs rungs(n, 0);
  while (true) {
    Combination c;
    c.rungs = rungs;
    for (size_t m = 0; m < n; ++m) c.choice.push_back(ladder[m][static_cast<size_t>(rungs[m])]);
    const ir::Program p = compile(c.choice);
    for (size_t m = 0; m < n; ++m) c.cost += recompute_time_ns(p, static_cast<int32_t>(m), cost);
    c.peak = cost::program_feasibility(p).worst.peak.count();
    out.push_back(std::move(c));
    size_t m = 0;
    for (; m < n; ++m) {
      if (++rungs[m] < static_cast<int32_t>(ladder[m].size())) break;
      rungs[m] = 0;
    }
    if (m == n) break;
  }
  std::sort(out.begin(), out.end(), [](const Combination& a, const Combination& b) {
    return a.cost != b.cost ? a.cost < b.cost : a.rungs < b.rungs;
  });
  return out;
}

// For every capacity at which the answer changes, the search's choice is the
// brute-force one, with and without its proofs by dominance.
void expect_search_matches_brute_force(scenario::LoadedScenario sc, scenario::PlacementKind kind,
                                       int32_t min_moves) {
  const auto cost = cost::make_analytic_cost_model(sc.spec.cluster(), scenario::BF16);
  const RecomputeRequest request = recompute_request(sc, kind);
  const CompileWithRecompute compile = compile_with_recompute(sc, kind, *cost);  // refers to `sc`
  const std::vector<Combination> all = brute_force(request, compile, *cost);
  ASSERT_GT(all.size(), 4u);
  const auto requested = std::find_if(all.begin(), all.end(), [](const Combination& c) {
    return std::all_of(c.rungs.begin(), c.rungs.end(), [](int32_t r) { return r == 0; });
  });
  ASSERT_NE(requested, all.end());
  std::set<int64_t> peaks;
  for (const Combination& c : all) peaks.insert(c.peak);
  int32_t checked = 0, moved = 0;
  int32_t compiled_with_proofs = 0, compiled_without = 0;
  for (int64_t capacity : peaks) {
    if (capacity >= requested->peak) continue;  // the request fits: nothing to choose
    set_capacity(sc, capacity);
    const auto expected =
        std::find_if(all.begin(), all.end(), [&](const Combination& c) { return c.peak <= capacity; });
    ASSERT_NE(expected, all.end());
    SCOPED_TRACE("capacity " + std::to_string(capacity));
    for (bool proofs : {true, false}) {
      RecomputeRequest r = request;
      r.fixed_order = r.fixed_order && proofs;
      const RecomputeFit fit = fit_recompute(r, compile, *cost);
      EXPECT_TRUE(fit.fits);
      EXPECT_EQ(fit.chosen, expected->choice) << "proofs " << proofs;
      EXPECT_LE(cost::program_feasibility(fit.program).worst.peak.count(), capacity);
      EXPECT_LE(fit.programs_compiled, static_cast<int32_t>(all.size()) + 2);
      (proofs ? compiled_with_proofs : compiled_without) += fit.programs_compiled;
    }
    ++checked;
    moved += expected->rungs != requested->rungs ? 1 : 0;
  }
  EXPECT_GE(checked, min_moves);
  EXPECT_GE(moved, min_moves);
  // The proofs spare compilations (same answers, checked above).
  if (request.fixed_order) {
    EXPECT_LT(compiled_with_proofs, compiled_without);
  }

  // Below the lowest peak nothing fits: the lower of the requested and the
  // top combination's peaks is reported, with every module at its top rung.
  const int64_t lowest = *peaks.begin();
  set_capacity(sc, lowest - 1);
  const RecomputeFit none = fit_recompute(request, compile, *cost);
  EXPECT_FALSE(none.fits);
  EXPECT_EQ(cost::program_feasibility(none.program).worst.peak.count(), lowest);
  EXPECT_EQ(none.programs_compiled, 2);
}

// Each rung's cost as the search reads it equals the recompute time measured
// on the program compiled with that rung: block N from the every-layer
// program's first N layers of each chunk.
void expect_block_costs_are_measured_ones(const scenario::LoadedScenario& sc, scenario::PlacementKind kind,
                                          int32_t module) {
  const auto cost = cost::make_analytic_cost_model(sc.spec.cluster(), scenario::BF16);
  const RecomputeRequest request = recompute_request(sc, kind);
  const CompileWithRecompute compile = compile_with_recompute(sc, kind, *cost);
  std::vector<ModuleRecompute> choice = request.requested;
  choice[static_cast<size_t>(module)] = {kFull, 0};
  const ir::Program full = compile(choice);
  const int64_t layers = max_chunk_layers(full, module);
  ASSERT_GE(layers, 2);
  for (int64_t n = 1; n <= layers; ++n) {
    choice[static_cast<size_t>(module)] = {kFull, n};
    const ir::Program block = compile(choice);
    EXPECT_EQ(block_recompute_time_ns(full, module, n, *cost), recompute_time_ns(block, module, *cost)) << n;
    EXPECT_GT(recompute_time_ns(block, module, *cost), 0);
  }
  EXPECT_EQ(block_recompute_time_ns(full, module, 0, *cost), recompute_time_ns(full, module, *cost));
}

scenario::LoadedScenario megatron_baseline() {
  Small s;  // 4 layers, tp 2, pp 2, dp 2, 1F1B: two LLM layers per chunk
  SmallEncoder e;  // 4 layers, all in the first stage's chunk
  scenario::LoadedScenario sc = compiler::testing::make_mllm_scenario(s, {e}, scenario::MEGATRON_BASELINE);
  with_overheads(sc);
  return sc;
}

TEST(RecomputeFit, MegatronBaselineChoosesTheFirstFittingCombinationInCostOrder) {
  expect_search_matches_brute_force(megatron_baseline(), scenario::MEGATRON_BASELINE, 3);
}

TEST(RecomputeFit, HeterogeneousChoosesTheFirstFittingCombinationInCostOrder) {
  testing::EncoderSpec e;  // colocated, dp 8, 2 layers
  e.layers = 3;
  scenario::LoadedScenario sc = testing::make_mllm(Small{}, {e});
  with_overheads(sc);
  expect_search_matches_brute_force(sc, scenario::HETEROGENEOUS, 3);
}

TEST(RecomputeFit, StartsFromTheRequestedRecompute) {
  scenario::LoadedScenario sc = megatron_baseline();
  sc.spec.mutable_parallel()->set_recompute(kSel);  // the LLM and (Megatron) the encoder
  expect_search_matches_brute_force(sc, scenario::MEGATRON_BASELINE, 2);
}

TEST(RecomputeFit, BlockCostsAreTheMeasuredOnes) {
  expect_block_costs_are_measured_ones(megatron_baseline(), scenario::MEGATRON_BASELINE, 0);
  expect_block_costs_are_measured_ones(megatron_baseline(), scenario::MEGATRON_BASELINE, 1);
  testing::EncoderSpec island;
  island.layers = 4;
  island.pp = 2;
  island.dp = 2;
  island.first_rank = 8;
  scenario::LoadedScenario sc = testing::make_mllm(Small{}, {island});
  with_overheads(sc);
  expect_block_costs_are_measured_ones(sc, scenario::HETEROGENEOUS, 1);
}

TEST(RecomputeFit, FrozenEncodersKeepTheirRecompute) {
  Small s;
  SmallEncoder e;
  e.frozen = true;
  scenario::LoadedScenario sc = compiler::testing::make_mllm_scenario(s, {e}, scenario::MEGATRON_BASELINE);
  const RecomputeRequest r = recompute_request(sc, scenario::MEGATRON_BASELINE);
  ASSERT_EQ(r.adjustable.size(), 2u);
  EXPECT_TRUE(r.adjustable[0]);
  EXPECT_FALSE(r.adjustable[1]);
}

// compile_as runs the search and records the choice per module.
TEST(RecomputeFit, CompileRecordsTheChosenRecompute) {
  scenario::LoadedScenario sc = megatron_baseline();
  const auto cost = cost::make_analytic_cost_model(sc.spec.cluster(), scenario::BF16);
  const RecomputeRequest request = recompute_request(sc, scenario::MEGATRON_BASELINE);
  std::vector<ModuleRecompute> top = {{kFull, 0}, {kFull, 0}};
  const ir::Program lowest = compile_with_recompute(sc, scenario::MEGATRON_BASELINE, *cost)(top);
  const ir::Program as_asked = compile_with_recompute(sc, scenario::MEGATRON_BASELINE, *cost)(request.requested);
  const int64_t low = cost::program_feasibility(lowest).worst.peak.count();
  const int64_t high = cost::program_feasibility(as_asked).worst.peak.count();
  ASSERT_LT(low, high);
  set_capacity(sc, (low + high) / 2);
  const ir::Program p = compile_as(sc, scenario::MEGATRON_BASELINE, *cost);
  EXPECT_TRUE(cost::program_feasibility(p).fits());
  const RecomputeFit fit = fit_recompute(request, compile_with_recompute(sc, scenario::MEGATRON_BASELINE, *cost), *cost);
  ASSERT_EQ(p.info().modules_size(), 2);
  EXPECT_EQ(p.info().recompute(), fit.chosen[0].mode);
  EXPECT_EQ(p.info().recompute_num_layers(), fit.chosen[0].num_layers);
  for (int m = 0; m < 2; ++m) {
    EXPECT_EQ(p.info().modules(m).recompute(), fit.chosen[static_cast<size_t>(m)].mode) << m;
    EXPECT_EQ(p.info().modules(m).recompute_num_layers(), fit.chosen[static_cast<size_t>(m)].num_layers) << m;
  }
  EXPECT_NE(fit.chosen, request.requested);
  EXPECT_EQ(infeasibility_reason(p), "");
}

TEST(RecomputeFit, ReasonNamesTheWorstRankItsPeakTheCapacityAndTheModules) {
  scenario::LoadedScenario sc = megatron_baseline();
  set_capacity(sc, int64_t{1} << 30);  // 1 GiB: the CUDA context and NCCL buffers alone exceed it
  const auto cost = cost::make_analytic_cost_model(sc.spec.cluster(), scenario::BF16);
  const ir::Program p = compile_as(sc, scenario::MEGATRON_BASELINE, *cost);
  const cost::Feasibility f = cost::program_feasibility(p);
  EXPECT_FALSE(f.fits());
  const std::string reason = infeasibility_reason(p);
  EXPECT_NE(reason.find("8 of 8 ranks exceed HBM: rank " + std::to_string(f.worst_rank) + " peaks at "),
            std::string::npos)
      << reason;
  EXPECT_NE(reason.find("> 1.07 GB"), std::string::npos) << reason;
  EXPECT_NE(reason.find("with gpt-small full recompute of every layer, vit-small full recompute of every layer"),
            std::string::npos)
      << reason;
  EXPECT_NE(reason.find("activations"), std::string::npos) << reason;
}

}  // namespace
}  // namespace lacuna::placement
