// The static memory peak (cost::program_feasibility, class_memory) equals the
// peak the engine reaches (report::BubbleAccounting) on compiled programs of
// every placement: each has one compute stream, whose deltas the engine
// applies in op order whatever the timing (docs/memory-model.md#feasibility).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/cost/cost_model.h"
#include "sim/cost/memory_peak.h"
#include "sim/engine/simulator.h"
#include "sim/placement/compile.h"
#include "sim/placement/hetero_test_support.h"
#include "sim/placement/optimus_test_support.h"
#include "sim/report/observers/bubble_accounting.h"

namespace lacuna::placement {
namespace {

using compiler::testing::Small;

// Overheads and a fragmentation that make every term visible.
void with_overheads(scenario::LoadedScenario& s) {
  auto* mo = s.spec.mutable_cluster()->mutable_memory_overheads();
  mo->set_cuda_context_gib(0.5);
  mo->set_nccl_communicator_mib(656);
  mo->set_allocator_fragmentation(0.15);
}

void expect_static_equals_simulated(const ir::Program& program, const std::string& what) {
  SCOPED_TRACE(what);
  const auto cost = cost::make_analytic_cost_model(program.cluster(), program.info().precision());
  engine::Simulator sim(program, *cost);
  report::BubbleAccounting acc;
  sim.add_observer(&acc);
  sim.run();
  ASSERT_EQ(static_cast<int32_t>(acc.ranks().size()), program.ranks_size());
  int32_t over = 0;
  for (const report::RankAccount& r : acc.ranks()) {
    const cost::ClassMemory m = cost::class_memory(program, program.ranks(r.rank).class_id());
    EXPECT_EQ(r.baseline_memory, m.baseline) << "rank " << r.rank;
    EXPECT_EQ(r.activation_peak, m.activation_peak) << "rank " << r.rank;
    EXPECT_EQ(r.peak_memory, m.peak) << "rank " << r.rank;
    EXPECT_GT(m.activation_peak, Bytes(0));
    EXPECT_GT(m.reserve, Bytes(0));
    over += r.over_capacity ? 1 : 0;
  }
  EXPECT_EQ(cost::program_feasibility(program).over_capacity_ranks, over);
}

TEST(StaticMemoryPeak, EqualsTheSimulatedPeakOfLlmPrograms) {
  struct Case {
    std::string name;
    scenario::ScheduleKind kind;
    int64_t v;
    scenario::Recompute recompute;
    int64_t recompute_layers;
  };
  const std::vector<Case> cases = {
      {"gpipe", scenario::GPIPE, 1, scenario::RECOMPUTE_NONE, 0},
      {"1f1b selective", scenario::ONE_F_ONE_B, 1, scenario::RECOMPUTE_SELECTIVE, 0},
      {"interleaved full", scenario::INTERLEAVED_1F1B, 2, scenario::RECOMPUTE_FULL, 0},
      {"zb-h1", scenario::ZB_H1, 1, scenario::RECOMPUTE_NONE, 0},
      {"1f1b full, first layer of each chunk", scenario::ONE_F_ONE_B, 1, scenario::RECOMPUTE_FULL, 1},
  };
  for (const Case& c : cases) {
    Small s;
    s.schedule = c.kind;
    s.v = c.v;
    s.recompute = c.recompute;
    scenario::LoadedScenario sc = compiler::testing::make_scenario(s);
    sc.spec.mutable_parallel()->set_recompute_num_layers(c.recompute_layers);
    with_overheads(sc);
    expect_static_equals_simulated(compile(sc), c.name);
  }
}

TEST(StaticMemoryPeak, EqualsTheSimulatedPeakOfEveryPlacement) {
  {
    Small s;
    s.layers = 8;
    for (auto kind : {scenario::MEGATRON_BASELINE, scenario::MEGATRON_BALANCED}) {
      scenario::LoadedScenario sc = compiler::testing::make_mllm_scenario(s, {compiler::testing::SmallEncoder{}}, kind, 2);
      with_overheads(sc);
      expect_static_equals_simulated(compile(sc), scenario::PlacementKind_Name(kind));
    }
  }
  {
    optimus::testing::SmallMllm m;
    scenario::LoadedScenario sc = optimus::testing::make_mllm(m);
    with_overheads(sc);
    expect_static_equals_simulated(compile(sc), "OPTIMUS");
  }
  {
    testing::EncoderSpec colocated;  // dp 8 on the LLM's 8 ranks
    scenario::LoadedScenario sc = testing::make_mllm(Small{}, {colocated});
    with_overheads(sc);
    expect_static_equals_simulated(compile(sc), "HETEROGENEOUS colocated");
    testing::EncoderSpec island;
    island.dp = 2;
    island.pp = 2;
    island.first_rank = 8;
    sc = testing::make_mllm(Small{}, {island});
    with_overheads(sc);
    expect_static_equals_simulated(compile(sc), "HETEROGENEOUS island");
  }
}

}  // namespace
}  // namespace lacuna::placement
