// Every compile path applies the host post-pass (compiler/host_model.h)
// exactly once (docs/compiler.md#the-host): with one host cost set at a time,
// each op carries that cost once, never twice, whichever placement built it.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "sim/compiler/compiler_test_support.h"
#include "sim/placement/compile.h"
#include "sim/placement/hetero_test_support.h"

namespace lacuna::placement {
namespace {

constexpr int64_t kNs = 1000;

enum class Cost { kKernel, kIteration };

scenario::LoadedScenario with_cost(scenario::LoadedScenario ls, Cost cost) {
  auto* host = ls.spec.mutable_cluster()->mutable_host();
  host->set_kernel_launch_us(cost == Cost::kKernel ? kNs / 1000.0 : 0);
  host->set_collective_launch_us(0);
  host->set_microbatch_overhead_us(0);
  host->set_iteration_overhead_us(cost == Cost::kIteration ? kNs / 1000.0 : 0);
  return ls;
}

// Kernel launch only: every kernel on a compute stream costs kNs, every other
// op nothing. Iteration overhead only: each compute stream's first op costs
// kNs, every other op nothing.
void expect_once(const ir::Program& p, Cost cost) {
  ASSERT_GT(p.classes_size(), 0);
  for (const auto& c : p.classes())
    for (const auto& st : c.streams())
      for (int i = 0; i < st.ops_size(); ++i) {
        const ir::Op& op = st.ops(i);
        int64_t want = 0;
        if (st.kind() == ir::COMPUTE)
          want = cost == Cost::kKernel ? (op.has_compute() ? kNs : 0) : (i == 0 ? kNs : 0);
        ASSERT_EQ(op.host_ns(), want) << c.name() << " " << st.name() << " op " << i << ": " << op.ShortDebugString();
      }
}

scenario::LoadedScenario llm_only() {
  compiler::testing::Small s;
  s.execution.set_pipeline_p2p(scenario::P2P_OVERLAPPED);
  return compiler::testing::make_scenario(s);
}

scenario::LoadedScenario mllm(scenario::PlacementKind kind) {
  compiler::testing::Small s;
  s.execution.set_pipeline_p2p(scenario::P2P_OVERLAPPED);
  if (kind == scenario::HETEROGENEOUS) {
    scenario::LoadedScenario ls = testing::make_mllm(s, {testing::EncoderSpec{}});
    ls.spec.mutable_placement()->set_kind(kind);
    return ls;
  }
  if (kind == scenario::MEGATRON_ENCODER_PP) {
    // The encoder's own ranks: dp 2 × tp 2 after the LLM's 8 (12 GPUs).
    s.gpus_per_node = 4;
    scenario::LoadedScenario ls =
        compiler::testing::make_mllm_scenario(s, {compiler::testing::SmallEncoder{}}, kind);
    ls.spec.mutable_cluster()->set_num_nodes(3);
    return ls;
  }
  // The balanced partition runs interleaved: 2 model chunks per rank.
  return compiler::testing::make_mllm_scenario(s, {compiler::testing::SmallEncoder{}}, kind,
                                               kind == scenario::MEGATRON_BALANCED ? 2 : 0);
}

TEST(HostModelOnce, LlmOnly) {
  for (Cost cost : {Cost::kKernel, Cost::kIteration}) expect_once(compile(with_cost(llm_only(), cost)), cost);
}

class HostModelOncePlacement : public ::testing::TestWithParam<scenario::PlacementKind> {};

TEST_P(HostModelOncePlacement, EveryOpCarriesItsCostOnce) {
  for (Cost cost : {Cost::kKernel, Cost::kIteration}) {
    const scenario::LoadedScenario ls = with_cost(mllm(GetParam()), cost);
    expect_once(compile(ls), cost);
    expect_once(compile_as(ls, GetParam()), cost);
  }
}

INSTANTIATE_TEST_SUITE_P(Placement, HostModelOncePlacement,
                         ::testing::Values(scenario::MEGATRON_BASELINE, scenario::MEGATRON_BALANCED, scenario::OPTIMUS,
                                           scenario::HETEROGENEOUS, scenario::MEGATRON_ENCODER_PP,
                                           scenario::MEGATRON_LAYER_SPLIT),
                         [](const ::testing::TestParamInfo<scenario::PlacementKind>& info) {
                           return scenario::PlacementKind_Name(info.param);
                         });

}  // namespace
}  // namespace lacuna::placement
