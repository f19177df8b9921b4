// Documented defaults (defaults.h, docs/scenario.md#defaults) and every error
// of a file at once (Error::all_of through validate_scenario).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <google/protobuf/util/message_differencer.h>

#include "sim/scenario/defaults.h"
#include "sim/scenario/test_support.h"

namespace lacuna::scenario {
namespace {

using ::testing::HasSubstr;
using testing::error_of;
using testing::line_of;
using testing::read_source;
using testing::replace_once;

const std::string kSmall = "scenarios/llm/gpt-1.3b-8gpu.pbtxt";

// The small scenario's parallel section: tp 2, sp, cp 1, pp 2, dp 2, v 1.
std::string without(std::string text, const std::vector<std::string>& lines) {
  for (const auto& l : lines) text = replace_once(text, l, "");
  return text;
}

TEST(Defaults, UnsetFieldsTakeTheirDefaultsAndAreReported) {
  const std::string text =
      without(read_source(kSmall), {"  cp: 1\n", "  dp: 2\n", "  virtual_stages: 1\n", "schedule {\n  kind: ONE_F_ONE_B\n}\n"});
  const LoadedScenario s = parse_scenario(text, Format::kText, "t.pbtxt");
  EXPECT_EQ(s.spec.parallel().cp(), 1);
  EXPECT_EQ(s.spec.parallel().virtual_stages(), 1);
  EXPECT_EQ(s.spec.parallel().dp(), 8 / (2 * 1 * 2));  // one node of 8 GPUs / (tp·cp·pp)
  EXPECT_EQ(s.spec.schedule().kind(), ONE_F_ONE_B);
  std::vector<std::string> fields;
  for (const auto& d : s.defaults) fields.push_back(d.field);
  EXPECT_EQ(fields, (std::vector<std::string>{"parallel.cp", "parallel.virtual_stages", "parallel.dp", "schedule.kind"}));
  EXPECT_EQ(s.defaults[2].value, "2");
  EXPECT_THAT(s.defaults[2].why, HasSubstr("8 GPUs / (tp·cp·pp = 4)"));
}

TEST(Defaults, TheFullScenarioResolvesUnchanged) {
  const std::string text = read_source(kSmall);
  const LoadedScenario s = parse_scenario(text, Format::kText, "t.pbtxt");
  EXPECT_TRUE(s.defaults.empty());
  // Dropping every defaulted field gives the very same resolved scenario.
  const std::string bare = without(text, {"  cp: 1\n", "  dp: 2\n", "  virtual_stages: 1\n"});
  const LoadedScenario b = parse_scenario(bare, Format::kText, "t.pbtxt");
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(b.spec, s.spec));
}

TEST(Defaults, AWrittenZeroIsTheUsersValue) {
  const std::string text = replace_once(read_source(kSmall), "  cp: 1\n", "  cp: 0\n");
  const Error e = error_of(text, Format::kText);
  EXPECT_EQ(e.where().field, "parallel.cp");
  EXPECT_EQ(e.where().line, line_of(text, "cp: 0"));
}

TEST(Defaults, DpIsLeftUnsetWhenTheGpusDoNotDivide) {
  // tp 3 does not divide 8 GPUs: no dp is made up, validation reports the layout.
  const std::string text = without(replace_once(read_source(kSmall), "  tp: 2\n", "  tp: 3\n"), {"  dp: 2\n"});
  const Error e = error_of(text, Format::kText);
  EXPECT_THAT(std::string(e.what()), HasSubstr("parallel.dp"));
}

TEST(AllErrors, ThreeIndependentErrorsAreReportedTogetherInFileOrder) {
  std::string text = read_source(kSmall);
  text = replace_once(text, "num_layers: 24", "num_layers: 0");        // model
  text = replace_once(text, "  tp: 2\n", "  tp: -2\n");                 // parallel
  text = replace_once(text, "global_batch: 32", "global_batch: 0");    // training
  const Error e = error_of(text, Format::kText, "three.pbtxt");
  ASSERT_EQ(e.parts().size(), 3u) << e.what();
  const std::string m = e.what();
  EXPECT_THAT(m, HasSubstr("three.pbtxt: 3 problems:"));
  const auto at = [&](const std::string& s) { return m.find(s); };
  // Numbered in file order: model (top), parallel, training (bottom).
  EXPECT_THAT(m, HasSubstr("1. " + std::to_string(line_of(text, "num_layers: 0")) + ":"));
  EXPECT_LT(at("model.llm.num_layers"), at("parallel.tp"));
  EXPECT_LT(at("parallel.tp"), at("training.global_batch"));
  EXPECT_THAT(m, HasSubstr("2. " + std::to_string(line_of(text, "tp: -2")) + ":"));
  EXPECT_THAT(m, HasSubstr("3. " + std::to_string(line_of(text, "global_batch: 0")) + ":"));
  EXPECT_EQ(e.parts()[1].where().field, "parallel.tp");
  // The checks that need a valid tp (tp divides heads, the GPU product) did
  // not run on tp = -2: nothing but the three problems is listed.
  EXPECT_EQ(m.find("must divide"), std::string::npos);
}

TEST(AllErrors, EveryIndependentProblemOfOneSectionIsReported) {
  // Two in the model section, two in parallel, one in the cluster, one in
  // training: each section reports all of its own.
  std::string text = read_source(kSmall);
  text = replace_once(text, "vocab_size: 51200", "vocab_size: 0");
  text = replace_once(text, "num_attention_heads: 16", "num_attention_heads: -1");
  text = replace_once(text, "  tp: 2\n", "  tp: 0\n");
  text = replace_once(text, "  pp: 2\n", "  pp: -3\n");
  text = replace_once(text, "num_nodes: 1", "num_nodes: 1\n  nics_per_node: 0");
  text = replace_once(text, "micro_batch: 2", "micro_batch: 0");
  const Error e = error_of(text, Format::kText, "six.pbtxt");
  ASSERT_EQ(e.parts().size(), 6u) << e.what();
  std::vector<std::string> fields;
  for (const Error& part : e.parts()) fields.push_back(part.where().field);
  EXPECT_EQ(fields, (std::vector<std::string>{"model.llm.num_attention_heads", "model.llm.vocab_size",
                                              "cluster.nics_per_node", "parallel.tp", "parallel.pp",
                                              "training.micro_batch"}));
  // The rules on an invalid field do not run: heads dividing hidden_size
  // and num_kv_heads dividing heads are not checked on heads = -1.
  EXPECT_EQ(std::string(e.what()).find("must divide"), std::string::npos) << e.what();
}

TEST(AllErrors, ARuleOnTwoValidFieldsStillRunsBesideAnotherProblem) {
  std::string text = read_source(kSmall);
  text = replace_once(text, "num_kv_heads: 16", "num_kv_heads: 5");  // 5 does not divide 16 heads
  text = replace_once(text, "vocab_size: 51200", "vocab_size: 0");
  const Error e = error_of(text, Format::kText);
  ASSERT_EQ(e.parts().size(), 2u) << e.what();
  EXPECT_EQ(e.parts()[0].where().field, "model.llm.num_kv_heads");
  EXPECT_EQ(e.parts()[1].where().field, "model.llm.vocab_size");
}

TEST(AllErrors, ASingleErrorKeepsItsFormat) {
  const std::string text = replace_once(read_source(kSmall), "num_layers: 24", "num_layers: 0");
  const Error e = error_of(text, Format::kText, "one.pbtxt");
  EXPECT_TRUE(e.parts().empty());
  EXPECT_EQ(e.where().field, "model.llm.num_layers");
  EXPECT_THAT(std::string(e.what()), HasSubstr("one.pbtxt:" + std::to_string(line_of(text, "num_layers: 0"))));
}

TEST(AllErrors, CrossSectionRulesWaitForValidSections) {
  // tp 5 breaks only a cross-section rule (5 does not divide 16 heads), and
  // it is reported once the sections are valid.
  const std::string text = replace_once(read_source(kSmall), "  tp: 2\n", "  tp: 5\n");
  const Error e = error_of(text, Format::kText);
  EXPECT_TRUE(e.parts().empty()) << e.what();
  EXPECT_EQ(e.where().field, "parallel.tp");
}

}  // namespace
}  // namespace lacuna::scenario
