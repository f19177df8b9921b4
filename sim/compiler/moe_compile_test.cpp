// MoE programs (docs/moe.md): Megatron-Core's expert groups, the EP stream's
// dispatch collectives, expert gradients reduced over expert DP, ProgramInfo,
// memory under EP, and the engine running them.
#include <gtest/gtest.h>

#include <cstdio>
#include <set>

#include "sim/compiler/compile.h"
#include "sim/compiler/compiler_test_support.h"
#include "sim/compiler/rank_layout.h"
#include "sim/engine/simulator.h"
#include "sim/ir/validate.h"
#include "sim/model/layer_shape.h"
#include "sim/model/moe.h"

namespace lacuna::compiler {
namespace {

using testing::make_scenario;
using testing::Small;

scenario::LoadedScenario moe_scenario(Small s, int64_t ep, int64_t etp, int64_t experts = 8, int64_t top_k = 2,
                                      scenario::MoeDispatcher dispatcher = scenario::DISPATCHER_ALLTOALL) {
  scenario::LoadedScenario ls = make_scenario(s);
  auto* moe = ls.spec.mutable_model()->mutable_llm()->mutable_moe();
  moe->set_num_experts(experts);
  moe->set_top_k(top_k);
  moe->set_expert_ffn_hidden_size(512);
  moe->set_first_dense_layers(1);
  moe->set_dispatcher(dispatcher);
  ls.spec.mutable_parallel()->set_ep(ep);
  ls.spec.mutable_parallel()->set_expert_tp(etp);
  return ls;
}

// The members of rank r's group in `slot`.
std::vector<int32_t> members(const ir::Program& p, int32_t rank, int32_t slot) {
  const int32_t g = p.ranks(rank).group(slot);
  if (g < 0) return {rank};
  return {p.groups(g).ranks().begin(), p.groups(g).ranks().end()};
}

TEST(MoeLayout, ExpertGroupsFollowMegatronCoreOrder) {
  // One stage of tp 2 × dp 4 = 8 ranks regrouped as expert_tp 2 × ep 2 ×
  // expert_dp 2 (expert_tp innermost, parallel_state.py's tp-ep-dp order).
  ir::Program p;
  const RankLayout layout(ParallelDims{2, 1, 4, 1}, "");
  add_rank_layout(layout, 8, p);
  add_expert_layout(layout, ExpertDims{2, 2, 8}, p);
  ASSERT_EQ(p.group_slots_size(), kNumMoeGroupSlots);
  EXPECT_EQ(p.group_slots(kSlotEp).kind(), ir::EP);
  EXPECT_EQ(members(p, 0, kSlotExpertTp), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(members(p, 0, kSlotEp), (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(members(p, 0, kSlotExpertDp), (std::vector<int32_t>{0, 4}));
  EXPECT_EQ(members(p, 5, kSlotEp), (std::vector<int32_t>{5, 7}));
  EXPECT_EQ(members(p, 5, kSlotExpertDp), (std::vector<int32_t>{1, 5}));
  EXPECT_EQ(p.groups(p.ranks(0).group(kSlotEp)).kind(), ir::EP);
}

TEST(MoeLayout, EpSpansDataParallelRanksAndPipelineStagesStayApart) {
  // tp 1, dp 8, pp 2: EP 4 inside each stage, expert DP 2.
  ir::Program p;
  const RankLayout layout(ParallelDims{1, 1, 8, 2}, "");
  add_rank_layout(layout, 8, p);
  add_expert_layout(layout, ExpertDims{4, 1, 8}, p);
  EXPECT_EQ(members(p, 9, kSlotEp), (std::vector<int32_t>{8, 9, 10, 11}));
  EXPECT_EQ(members(p, 9, kSlotExpertDp), (std::vector<int32_t>{9, 13}));
  EXPECT_EQ(p.ranks(9).group(kSlotExpertTp), -1);
}

TEST(MoeLayout, HierarchicalGroupsSplitEpByNvlinkDomain) {
  // ep 8 over 2 domains of 4 GPUs: intra {0..3}, inter {r, r + 4}.
  ir::Program p;
  const RankLayout layout(ParallelDims{1, 1, 8, 1}, "");
  add_rank_layout(layout, 4, p);
  add_expert_layout(layout, ExpertDims{8, 1, 4}, p);
  EXPECT_EQ(members(p, 1, kSlotEpIntraDomain), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(members(p, 1, kSlotEpInterDomain), (std::vector<int32_t>{1, 5}));
  EXPECT_EQ(members(p, 6, kSlotEpInterDomain), (std::vector<int32_t>{2, 6}));
}

TEST(MoeCompile, DispatchRunsOnTheEpStreamAndExpertsCarryRolesAndLayers) {
  Small s;
  s.sp = true;
  const ir::Program p = compile(moe_scenario(s, 2, 1));
  ir::validate_program(p);
  ASSERT_TRUE(p.info().has_moe());
  EXPECT_EQ(p.info().moe().num_experts(), 8);
  EXPECT_EQ(p.info().moe().ep(), 2);
  EXPECT_EQ(p.info().ep(), 2);
  EXPECT_EQ(p.info().expert_tp(), 1);
  EXPECT_EQ(p.info().moe().dispatcher(), scenario::DISPATCHER_ALLTOALL);
  // Routed tokens per rank per microbatch: micro_batch · seq / tp (SP).
  EXPECT_EQ(p.info().moe().tokens_per_microbatch(), s.micro_batch * s.seq / s.tp);
  const model::LayerShape shape = model::layer_shape(moe_scenario(s, 2, 1).spec);
  const int64_t a2a_bytes = model::moe_tokens(shape).sent * s.hidden * 2;
  std::set<int32_t> expert_layers;
  for (const auto& c : p.classes()) {
    const ir::Stream* ep = testing::find_stream(c, "ep");
    ASSERT_NE(ep, nullptr) << c.name();
    EXPECT_EQ(ep->kind(), ir::EP_COMM);
    int64_t a2a = 0, count_gathers = 0;
    for (const auto& op : ep->ops())
      if (op.has_collective() && op.collective().kind() == ir::ALL_GATHER) {
        // The per-expert token counts (int64 per expert from each EP rank),
        // once per MoE layer forward (docs/moe.md#host-synchronisation).
        EXPECT_EQ(op.collective().bytes(), 8 * 8 * 2);
        EXPECT_EQ(op.phase(), ir::FORWARD);
        ++count_gathers;
      } else if (op.has_collective()) {
        EXPECT_EQ(op.collective().kind(), ir::ALL_TO_ALL);
        EXPECT_EQ(op.collective().group_slot(), kSlotEp);
        EXPECT_EQ(op.collective().bytes(), a2a_bytes);
        EXPECT_GE(op.layer(), 1);  // layer 0 is dense (first_dense_layers 1)
        ++a2a;
      }
    EXPECT_GT(a2a, 0);
    // Dispatch and combine, forward and backward: four all-to-alls per count gather.
    EXPECT_EQ(a2a, 4 * count_gathers);
    for (const auto& st : c.streams())
      for (const auto& op : st.ops())
        if (op.has_compute() && op.compute().role() == ir::ROLE_EXPERT_FC1) {
          EXPECT_GE(op.layer(), 1);
          expert_layers.insert(op.layer());
        }
  }
  EXPECT_EQ(expert_layers, (std::set<int32_t>{1, 2, 3}));
}

TEST(MoeCompile, ExpertGradientsAreReducedOverExpertDp) {
  Small s;  // tp 2, dp 2, pp 2: ep 2 with expert_tp 1 leaves expert DP 2
  s.sp = true;
  s.dp = 4;
  s.global_batch = 32;
  const ir::Program p = compile(moe_scenario(s, 4, 1));
  int64_t expert_dp_collectives = 0, bytes = 0;
  for (const auto& c : p.classes())
    for (const auto& st : c.streams())
      for (const auto& op : st.ops())
        if (op.has_collective() && op.collective().group_slot() == kSlotExpertDp) {
          ++expert_dp_collectives;
          if (op.collective().kind() == ir::REDUCE_SCATTER) bytes += op.collective().bytes();
        }
  EXPECT_GT(expert_dp_collectives, 0);
  // Every MoE layer's local experts, fp32 gradients: 3 MoE layers of
  // 8/4 experts × (h·f + f + f·h + h) (GELU, biases), expert TP 1.
  EXPECT_EQ(bytes, 3 * 2 * (2 * s.hidden * 512 + 512 + s.hidden) * 4);
}

TEST(MoeCompile, ExpertStateIsShardedOverExpertDp) {
  Small s;
  s.sp = true;
  s.dp = 4;
  s.global_batch = 32;
  s.pp = 1;
  const ir::Program ep1 = compile(moe_scenario(s, 1, 1));
  const ir::Program ep4 = compile(moe_scenario(s, 4, 1));
  // EP 4 holds a quarter of the experts: their weights and gradients drop by
  // 3/4 of the experts' share; the distributed optimizer's expert state is
  // sharded over expert DP (8 without EP, 2 with EP 4), the same per rank.
  const model::LayerShape shape = model::layer_shape(moe_scenario(s, 1, 1).spec);
  model::LayerShape shape4 = model::layer_shape(moe_scenario(s, 4, 1).spec);
  const int64_t experts1 = 3 * model::moe_routed_expert_parameters(shape);
  const int64_t experts4 = 3 * model::moe_routed_expert_parameters(shape4);
  EXPECT_EQ(experts1, 4 * experts4);
  EXPECT_EQ(ep1.classes(0).memory().weights_bytes() - ep4.classes(0).memory().weights_bytes(),
            2 * (experts1 - experts4));
  EXPECT_EQ(ep1.classes(0).memory().gradients_bytes() - ep4.classes(0).memory().gradients_bytes(),
            4 * (experts1 - experts4));
  EXPECT_NEAR(ep1.classes(0).memory().optimizer_bytes(), ep4.classes(0).memory().optimizer_bytes(), 16);
}

TEST(MoeCompile, EveryDispatcherSimulates) {
  const testing::TrivialCost cost;
  for (auto d : {scenario::DISPATCHER_ALLTOALL, scenario::DISPATCHER_ALLGATHER, scenario::DISPATCHER_HIERARCHICAL}) {
    for (int64_t etp : {1, 2}) {
      SCOPED_TRACE(std::to_string(d) + " expert_tp " + std::to_string(etp));
      Small s;
      s.sp = true;
      s.dp = 4;
      s.global_batch = 32;
      s.gpus_per_node = 4;  // hierarchical: EP across two NVLink domains
      const ir::Program p = compile(moe_scenario(s, 4 / etp, etp, 8, 2, d));
      ir::validate_program(p);
      engine::Simulator full(p, cost);
      const auto r = full.run();
      EXPECT_GT(r.end_time.count(), 0);
      engine::Simulator folded(p, cost, {.fold = true});
      EXPECT_EQ(folded.run().end_time, r.end_time);
    }
  }
}

// One expert, top-1, no EP / TP: the simulated iteration is the dense one
// once the router, permute and unpermute kernels (Megatron-Core runs them
// even for one expert) are made free (1 ns each).
TEST(MoeCompile, OneExpertTopOneSimulatesAsTheDenseModel) {
  const testing::TrivialCost cost;
  Small s;
  s.tp = 1;
  s.dp = 1;
  s.global_batch = 8;
  scenario::LoadedScenario moe = moe_scenario(s, 1, 1, 1, 1);
  moe.spec.mutable_model()->mutable_llm()->mutable_moe()->set_expert_ffn_hidden_size(s.ffn);
  moe.spec.mutable_model()->mutable_llm()->mutable_moe()->set_first_dense_layers(0);
  ir::Program p = compile(moe);
  int64_t freed = 0;
  for (auto& c : *p.mutable_classes())
    for (auto& st : *c.mutable_streams())
      for (auto& op : *st.mutable_ops())
        if (op.has_compute() && (op.compute().role() == ir::ROLE_ROUTER || op.compute().role() == ir::ROLE_MOE_PERMUTE ||
                                 op.compute().role() == ir::ROLE_MOE_UNPERMUTE)) {
          op.mutable_compute()->set_fixed_duration_ns(1);
          ++freed;
        }
  ASSERT_GT(freed, 0);
  const auto dense = engine::Simulator(compile(make_scenario(s)), cost).run().end_time;
  const auto one_expert = engine::Simulator(p, cost).run().end_time;
  std::printf("  dense %lld ns, one expert %lld ns, %lld free ops\n", static_cast<long long>(dense.count()),
              static_cast<long long>(one_expert.count()), static_cast<long long>(freed));
  EXPECT_GE(one_expert.count(), dense.count());
  EXPECT_LE(one_expert.count(), dense.count() + freed);
}

TEST(MoeCompile, DenseProgramsKeepTheirSlots) {
  const ir::Program p = compile(make_scenario(Small{}));
  EXPECT_EQ(p.group_slots_size(), kNumGroupSlots);
  EXPECT_FALSE(p.info().has_moe());
}

}  // namespace
}  // namespace lacuna::compiler
