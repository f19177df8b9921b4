// The MoE validation rules (sim/scenario/moe.h): each error names the file,
// the line and the field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/scenario/moe.h"
#include "sim/scenario/test_support.h"

namespace lacuna::scenario {
namespace {

using ::testing::HasSubstr;
using testing::error_of;
using testing::line_of;
using testing::read_source;
using testing::replace_once;

const std::string kSmall = "scenarios/llm/gpt-1.3b-8gpu.pbtxt";

// The 1.3B scenario (tp 2, dp 2) with a MoE block and parallel lines added.
std::string with_moe(const std::string& moe, const std::string& parallel = "") {
  std::string text = replace_once(read_source(kSmall), "ffn_hidden_size: 8192\n",
                                  "ffn_hidden_size: 8192\n    moe {\n" + moe + "    }\n");
  if (!parallel.empty()) text = replace_once(text, "  dp: 2\n", "  dp: 2\n" + parallel);
  return text;
}

void expect_error(const std::string& text, const std::string& field, const std::string& message,
                  const std::string& at) {
  const Error e = error_of(text, Format::kText, "moe.pbtxt");
  const std::string what = e.what();
  EXPECT_THAT(what, HasSubstr(field)) << what;
  EXPECT_THAT(what, HasSubstr(message)) << what;
  EXPECT_THAT(what, HasSubstr("moe.pbtxt:" + std::to_string(line_of(text, at)))) << what;
}

TEST(MoeValidation, EpMustDivideTheExperts) {
  const std::string text = with_moe("      num_experts: 6\n      top_k: 2\n", "  ep: 4\n  expert_tp: 1\n");
  expect_error(text, "parallel.ep", "ep 4 does not divide num_experts 6", "ep: 4");
}

TEST(MoeValidation, TopKAtMostTheExperts) {
  expect_error(with_moe("      num_experts: 4\n      top_k: 8\n"), "model.llm.moe.top_k", "above num_experts 4",
               "top_k: 8");
}

TEST(MoeValidation, TopKAtLeastOne) {
  expect_error(with_moe("      num_experts: 4\n      top_k: -1\n"), "model.llm.moe.top_k", "positive integer",
               "top_k: -1");
}

TEST(MoeValidation, MoeFieldsNeedExperts) {
  expect_error(with_moe("      top_k: 2\n"), "model.llm.moe.top_k", "num_experts is not", "top_k: 2");
  expect_error(with_moe("      num_experts: 0\n", "  ep: 2\n"), "parallel.ep", "no experts", "ep: 2");
}

TEST(MoeValidation, EpTimesExpertTpMustDivideTheStageRanks) {
  // tp 2 × dp 2 = 4 ranks per stage; ep 4 × expert_tp 2 (the default: tp) = 8.
  expect_error(with_moe("      num_experts: 8\n      top_k: 2\n", "  ep: 4\n"), "parallel.ep",
               "does not divide the ranks of a pipeline stage", "ep: 4");
}

TEST(MoeValidation, ExpertTpMustDivideTheExpertFfn) {
  expect_error(with_moe("      num_experts: 4\n      top_k: 2\n      expert_ffn_hidden_size: 1001\n"),
               "model.llm.moe.expert_ffn_hidden_size", "does not divide the expert FFN width 1001",
               "expert_ffn_hidden_size: 1001");
}

TEST(MoeValidation, PaddingNeedsACapacity) {
  expect_error(with_moe("      num_experts: 4\n      top_k: 2\n      pad_to_capacity: true\n"),
               "model.llm.moe.pad_to_capacity", "capacity_factor > 0", "pad_to_capacity: true");
}

TEST(MoeValidation, DirichletNeedsAPositiveConcentration) {
  expect_error(with_moe("      num_experts: 4\n      top_k: 2\n      routing {\n        distribution: "
                        "ROUTING_DIRICHLET_MULTINOMIAL\n        dirichlet_alpha: 0\n      }\n"),
               "model.llm.moe.routing.dirichlet_alpha", "must be > 0", "dirichlet_alpha: 0");
}

TEST(MoeValidation, TensorParallelNeedsSequenceParallel) {
  const std::string text = replace_once(with_moe("      num_experts: 4\n      top_k: 2\n"),
                                        "sequence_parallel: true", "sequence_parallel: false");
  expect_error(text, "parallel.sequence_parallel", "must be true for mixture-of-experts layers",
               "sequence_parallel: false");
}

TEST(MoeValidation, EncodersHaveNoExperts) {
  std::string text = read_source("tests/data/tiny-vit-gpt-8gpu.pbtxt");
  text = replace_once(text, "      ffn_hidden_size: 2048\n",
                      "      ffn_hidden_size: 2048\n      moe { num_experts: 4 top_k: 1 }\n");
  expect_error(text, "model.encoders[0].transformer.moe.num_experts", "not modelled", "num_experts: 4");
}

TEST(MoeValidation, ValidMoeResolvesMegatronDefaults) {
  const std::string text = with_moe("      num_experts: 8\n      top_k: 2\n", "  ep: 2\n  expert_tp: 1\n");
  const LoadedScenario s = parse_scenario(text, Format::kText, "moe.pbtxt");
  const Moe m = resolve_moe(s.spec);
  EXPECT_EQ(m.expert_ffn_hidden_size(), 8192);  // the dense FFN
  EXPECT_EQ(m.layer_frequency(), 1);
  EXPECT_EQ(m.dispatcher(), DISPATCHER_ALLGATHER);  // transformer_config.py's default
  EXPECT_FALSE(m.grouped_gemm());
  EXPECT_EQ(resolved_ep(s.spec), 2);
  EXPECT_EQ(resolved_expert_tp(s.spec), 1);
  EXPECT_EQ(expert_dp(s.spec), 2);  // tp 2 · dp 2 / (ep 2 · expert_tp 1)
}

}  // namespace
}  // namespace lacuna::scenario
