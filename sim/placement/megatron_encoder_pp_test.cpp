// Megatron-LM's encoder pipeline (placement MEGATRON_ENCODER_PP,
// megatron_encoder_pp.h): the encoder on ranks of its own ahead of the LLM's
// first stage, Megatron's layout rules, and the program it compiles to.
#include "sim/placement/megatron_encoder_pp.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include "sim/compiler/compiler_test_support.h"
#include "sim/engine/simulator.h"
#include "sim/placement/compile.h"
#include "sim/placement/hetero_test_support.h"
#include "sim/placement/modules.h"

namespace lacuna::placement {
namespace {

using compiler::testing::Small;
using compiler::testing::SmallEncoder;
using compiler::testing::TrivialCost;
using scenario::MEGATRON_ENCODER_PP;

const TrivialCost& trivial() {
  static const TrivialCost cost;
  return cost;
}

// The compiler tests' small LLM (tp 2, pp 2, dp 2: 8 ranks) on nodes of 4
// GPUs, with `extra` GPUs for the encoder's ranks.
scenario::LoadedScenario scenario_with(Small llm, const std::vector<SmallEncoder>& encoders, int64_t extra) {
  llm.gpus_per_node = 4;
  auto ls = compiler::testing::make_mllm_scenario(llm, encoders, MEGATRON_ENCODER_PP);
  const int64_t world = llm.tp * llm.cp * llm.pp * llm.dp;
  ls.spec.mutable_cluster()->set_num_nodes((world + extra) / llm.gpus_per_node);
  return ls;
}

void set_layout(scenario::LoadedScenario& ls, int64_t tp, int64_t pp, int64_t dp, int64_t cp = 1) {
  auto* l = ls.spec.mutable_model()->mutable_encoders(0)->mutable_layout();
  l->set_tp(tp);
  l->set_pp(pp);
  l->set_dp(dp);
  l->set_cp(cp);
}

ir::Program build(const scenario::LoadedScenario& ls) { return compile_as(ls, MEGATRON_ENCODER_PP, trivial()); }

int64_t end_time(const ir::Program& p, bool fold = false) {
  return engine::Simulator(p, trivial(), {.fold = fold}).run().end_time.count();
}

struct Case {
  std::string name;
  scenario::LoadedScenario ls;
};

// Encoder tp as the LLM's (default) or from its layout, pp 1 or 2, SP,
// an interleaved scenario (run as 1F1B), a frozen encoder.
std::vector<Case> cases() {
  std::vector<Case> out;
  out.push_back({"default tp2 pp1", scenario_with(Small{}, {SmallEncoder{}}, 4)});
  {
    auto ls = scenario_with(Small{}, {SmallEncoder{}}, 4);
    set_layout(ls, 1, 2, 2);
    out.push_back({"layout tp1 pp2", ls});
  }
  {
    Small sp;
    sp.sp = true;
    out.push_back({"sp", scenario_with(sp, {SmallEncoder{}}, 4)});
  }
  {
    Small il;
    il.schedule = scenario::INTERLEAVED_1F1B;
    il.v = 2;
    out.push_back({"interleaved scenario", scenario_with(il, {SmallEncoder{}}, 4)});
  }
  {
    SmallEncoder frozen;
    frozen.frozen = true;
    out.push_back({"frozen", scenario_with(Small{}, {frozen}, 4)});
  }
  return out;
}

TEST(MegatronEncoderPp, IslandLayoutFollowsMegatronsRules) {
  const auto ls = scenario_with(Small{}, {SmallEncoder{}}, 4);
  const auto island = encoder_pp_scenario(ls);
  const auto& l = island.spec.model().encoders(0).layout();
  EXPECT_EQ(island.spec.placement().kind(), scenario::HETEROGENEOUS);
  EXPECT_EQ(l.tp(), 2);  // encoder tp 0 → the LLM's
  EXPECT_EQ(l.pp(), 1);
  EXPECT_EQ(l.dp(), 2);  // the LLM's
  EXPECT_EQ(l.cp(), 1);
  EXPECT_EQ(l.first_rank(), 8);  // after the LLM's 8 ranks
  Small il;
  il.schedule = scenario::INTERLEAVED_1F1B;
  il.v = 2;
  const auto one = encoder_pp_scenario(scenario_with(il, {SmallEncoder{}}, 4));
  EXPECT_EQ(one.spec.schedule().kind(), scenario::ONE_F_ONE_B);
  EXPECT_EQ(one.spec.parallel().virtual_stages(), 1);
}

TEST(MegatronEncoderPp, RanksInfoAndNoDeadlockFullAndFolded) {
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.name);
    const ir::Program p = build(c.ls);
    EXPECT_EQ(p.info().placement(), MEGATRON_ENCODER_PP);
    EXPECT_EQ(p.info().num_ranks(), 12);
    EXPECT_EQ(p.ranks_size(), 12);
    // The encoder's ranks run encoder work only.
    for (int32_t r = 8; r < 12; ++r)
      for (const auto& s : p.classes(p.ranks(r).class_id()).streams())
        for (const auto& op : s.ops()) ASSERT_EQ(op.module(), 1) << "rank " << r;
    const int64_t full = end_time(p), folded = end_time(p, true);
    EXPECT_GT(full, 0);
    EXPECT_EQ(full, folded);
  }
}

TEST(MegatronEncoderPp, EveryEncoderForwardHasItsBackwardUnlessFrozen) {
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.name);
    const ir::Program p = build(c.ls);
    const bool frozen = c.ls.spec.model().encoders(0).frozen();
    const int64_t layers = c.ls.spec.model().encoders(0).transformer().num_layers();
    const int32_t microbatches = 4;  // 16 / (2 × 2)
    // Per encoder rank class: (microbatch, layer) per phase, once per rank.
    std::map<ir::Phase, std::multiset<std::pair<int32_t, int32_t>>> seen;
    std::set<int32_t> classes;
    for (int32_t r = 8; r < 12; ++r) classes.insert(p.ranks(r).class_id());
    for (int32_t cls : classes)
      for (const auto& s : p.classes(cls).streams())
        for (const auto& op : s.ops())
          if (op.has_compute() && op.module() == 1 && op.layer() >= 0)
            seen[op.phase()].insert({op.microbatch(), op.layer()});
    for (int32_t mb = 0; mb < microbatches; ++mb)
      for (int32_t l = 0; l < layers; ++l) {
        EXPECT_GT(seen[ir::FORWARD].count({mb, l}), 0u) << mb << " " << l;
        EXPECT_EQ(seen[ir::FORWARD].count({mb, l}) > 0, true);
        EXPECT_EQ(seen[ir::BACKWARD_INPUT].count({mb, l}) > 0 || seen[ir::BACKWARD_WEIGHT].count({mb, l}) > 0,
                  !frozen)
            << mb << " " << l;
      }
  }
}

// With the encoder's work (almost) free — every module > 0 op 1 ns — the
// iteration is the LLM alone's, up to 1 ns per encoder op.
TEST(MegatronEncoderPp, ZeroEncoderWorkGivesTheLlmAlone) {
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.name);
    ir::Program p = build(c.ls);
    testing::make_encoder_work_free(p);
    // The LLM as the placement runs it (an interleaved scenario as 1F1B).
    auto alone_scenario = llm_only(encoder_pp_scenario(c.ls));
    const ir::Program alone = compile_as(alone_scenario, MEGATRON_ENCODER_PP, trivial());
    const int64_t t = end_time(p), t_llm = end_time(alone);
    EXPECT_GE(t, t_llm);
    EXPECT_LE(t, t_llm + testing::ops_of_module_above_zero(p));
  }
}

TEST(MegatronEncoderPp, ErrorsNameTheField) {
  auto expect_error = [](const std::function<void()>& f, const std::vector<std::string>& parts) {
    try {
      f();
      ADD_FAILURE() << "no error, expected: " << parts.front();
    } catch (const Error& e) {
      for (const auto& part : parts) EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  // Encoder tp (from its layout) not dividing its heads.
  {
    SmallEncoder enc;
    enc.heads = 6;
    enc.hidden = 192;
    Small llm;
    llm.tp = 4;
    llm.dp = 1;
    auto ls = scenario_with(llm, {enc}, 4);
    set_layout(ls, 4, 1, 1);
    expect_error([&] { build(ls); }, {"model.encoders[0].layout.tp", "must divide the encoder's attention heads (6)"});
  }
  // The default (the LLM's tp) not dividing them names parallel.tp.
  {
    SmallEncoder enc;
    enc.heads = 6;
    enc.hidden = 192;
    Small llm;
    llm.tp = 4;
    llm.dp = 1;
    expect_error([&] { build(scenario_with(llm, {enc}, 8)); }, {"parallel.tp", "attention heads (6)"});
  }
  // More TP than the LLM.
  {
    auto ls = scenario_with(Small{}, {SmallEncoder{}}, 8);
    set_layout(ls, 4, 1, 2);
    expect_error([&] { build(ls); }, {"model.encoders[0].layout.tp", "exceeds the LLM's tp = 2"});
  }
  // dp other than the LLM's.
  {
    auto ls = scenario_with(Small{}, {SmallEncoder{}}, 4);
    set_layout(ls, 1, 1, 4);
    expect_error([&] { build(ls); }, {"model.encoders[0].layout.dp", "share the LLM's data parallelism"});
  }
  // No GPUs for the encoder's ranks.
  expect_error([&] { build(scenario_with(Small{}, {SmallEncoder{}}, 0)); },
               {"cluster.num_nodes", "4 ranks of its own", "set cluster.num_nodes: 3"});
  // Two encoders.
  expect_error([&] { build(scenario_with(Small{}, {SmallEncoder{}, SmallEncoder{}}, 4)); },
               {"model.encoders", "holds one encoder"});
  // Encoder pp not dividing its layers.
  {
    auto ls = scenario_with(Small{}, {SmallEncoder{}}, 8);
    set_layout(ls, 2, 3, 2);
    ls.spec.mutable_cluster()->set_num_nodes(5);  // 8 + 12 ranks
    expect_error([&] { build(ls); }, {"model.encoders[0].layout.pp", "must divide the encoder's 4 layers"});
  }
}

TEST(MegatronEncoderPp, ListedByCompareWithTheLayerSplit) {
  const auto ls = scenario_with(Small{}, {SmallEncoder{}}, 4);
  const auto kinds = applicable_placements(ls);
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), MEGATRON_ENCODER_PP), kinds.end());
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), scenario::MEGATRON_LAYER_SPLIT), kinds.end());
}

}  // namespace
}  // namespace lacuna::placement
