// --scale-down: which fields shrink, that the compiled program shrinks with
// them, every error with its field, and every shipped scenario at factor 2.
#include "sim/scenario/scale_down.h"

#include <google/protobuf/util/message_differencer.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "sim/placement/compile.h"
#include "sim/scenario/test_support.h"
#include "sim/core/option_text.h"

namespace lacuna::scenario {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::line_of;
using testing::read_source;
using testing::replace_once;
using testing::source_path;

constexpr const char* kTiny = "scenarios/cpu/tiny-mllm-cpu-8rank.pbtxt";
constexpr const char* kGpt = "scenarios/llm/gpt-1.3b-8gpu.pbtxt";

bool same(const Scenario& a, const Scenario& b) {
  return google::protobuf::util::MessageDifferencer::Equals(a, b);
}

// The Error parse_scenario throws for `text` at `factor`.
Error scaled_error(const std::string& text, int64_t factor) {
  try {
    parse_scenario(text, Format::kText, "test.pbtxt", factor);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error at --scale-down " << factor;
  return Error("no error");
}

// FLOPs of the LLM's transformer-layer GEMMs per iteration, over all ranks.
double llm_layer_gemm_flops(const ir::Program& p) {
  std::vector<int64_t> ranks(static_cast<size_t>(p.classes_size()), 0);
  for (const auto& b : p.ranks()) ++ranks[static_cast<size_t>(b.class_id())];
  double sum = 0;
  for (int c = 0; c < p.classes_size(); ++c)
    for (const auto& s : p.classes(c).streams())
      for (const auto& op : s.ops())
        if (op.has_compute() && op.module() == 0 && op.layer() >= 0 && op.compute().op_class() == ir::GEMM)
          sum += op.compute().flops() * static_cast<double>(ranks[static_cast<size_t>(c)]);
  return sum;
}

TEST(ScaleDown, FactorOneIsTheFileAsWritten) {
  const auto plain = load_scenario(source_path(kTiny));
  const auto one = load_scenario(source_path(kTiny), 1);
  EXPECT_TRUE(same(plain.spec, one.spec));
  EXPECT_EQ(one.scale_down, 1);
  Scenario edited = plain.spec;
  scale_down(edited, 1);
  EXPECT_TRUE(same(plain.spec, edited));
  // Not written into the program: unscaled programs keep their bytes.
  const ir::Program p = placement::compile(one);
  EXPECT_EQ(p.info().scale_down(), 0);
  EXPECT_FALSE(p.info().GetReflection()->HasField(p.info(), p.info().GetDescriptor()->FindFieldByName("scale_down")));
}

TEST(ScaleDown, FactorTwoHalvesHiddenAndSequenceSizesOnly) {
  const auto plain = load_scenario(source_path(kTiny));
  const auto half = load_scenario(source_path(kTiny), 2);
  EXPECT_EQ(half.scale_down, 2);
  const auto& l = half.spec.model().llm();
  EXPECT_EQ(l.hidden_size(), 128);
  EXPECT_EQ(l.ffn_hidden_size(), 512);
  EXPECT_EQ(l.seq_length(), 64);
  const auto& e = half.spec.model().encoders(0);
  EXPECT_EQ(e.transformer().hidden_size(), 64);
  EXPECT_EQ(e.transformer().ffn_hidden_size(), 256);
  EXPECT_EQ(e.transformer().seq_length(), 32);

  // Everything else is the file's: put the scaled fields back and compare.
  Scenario back = half.spec;
  auto* bl = back.mutable_model()->mutable_llm();
  bl->set_hidden_size(256);
  bl->set_ffn_hidden_size(1024);
  bl->set_seq_length(128);
  auto* bt = back.mutable_model()->mutable_encoders(0)->mutable_transformer();
  bt->set_hidden_size(128);
  bt->set_ffn_hidden_size(512);
  bt->set_seq_length(64);
  EXPECT_TRUE(same(plain.spec, back));
}

TEST(ScaleDown, CompiledProgramShrinksAndRecordsTheFactor) {
  const ir::Program plain = placement::compile(load_scenario(source_path(kTiny)));
  const ir::Program half = placement::compile(load_scenario(source_path(kTiny), 2));
  EXPECT_EQ(half.info().scale_down(), 2);
  EXPECT_EQ(half.info().scenario_name(), plain.info().scenario_name());
  EXPECT_EQ(half.info().seq_length(), 64);
  EXPECT_EQ(half.info().tokens_per_iteration() * 2, plain.info().tokens_per_iteration());
  // Same ranks, groups and schedule; tensors smaller.
  EXPECT_EQ(half.ranks_size(), plain.ranks_size());
  EXPECT_EQ(half.groups_size(), plain.groups_size());
  // Layer GEMMs are 2·tokens·h·(c·h): tokens / 2 and h / 2 → / 8.
  const double ratio = llm_layer_gemm_flops(plain) / llm_layer_gemm_flops(half);
  EXPECT_NEAR(ratio, 8.0, 1e-9);
}

TEST(ScaleDown, EveryPlacementAndLlmOnlyProgramRecordsTheFactor) {
  const auto tiny = load_scenario(source_path(kTiny), 4);
  for (PlacementKind kind : placement::applicable_placements(tiny)) {
    SCOPED_TRACE(PlacementKind_Name(kind));
    try {
      EXPECT_EQ(placement::compile_as(tiny, kind).info().scale_down(), 4);
    } catch (const Error& e) {
      // A placement the tiny layout does not suit fails for its own reason.
      EXPECT_THAT(e.what(), Not(HasSubstr("scale-down"))) << e.what();
    }
  }
  EXPECT_EQ(placement::compile(load_scenario(source_path(kGpt), 2)).info().scale_down(), 2);
}

TEST(ScaleDown, LargestFactor) {
  EXPECT_EQ(largest_scale_down(load_scenario(source_path(kTiny)).spec), 32);
  // GPT 1.3B: head dimension 128 and SP over tp 2 of the 2,048 tokens.
  EXPECT_EQ(largest_scale_down(load_scenario(source_path(kGpt)).spec), 128);
}

TEST(ScaleDownErrors, FactorBelowOne) {
  for (int64_t f : {0, -2}) {
    try {
      load_scenario(source_path(kTiny), f);
      FAIL();
    } catch (const Error& e) {
      EXPECT_EQ(neutral_options(e.where().field), "`scale-down`");
      EXPECT_THAT(e.problem(), HasSubstr("must be ≥ 1"));
    }
    Scenario s;
    EXPECT_THROW(scale_down(s, f), Error);
  }
}

struct FieldCase {
  std::string from, to;  // edit of the tiny scenario ("" none)
  int64_t factor;
  std::string field;     // the path the error names
  std::string problem;   // part of its message
};

TEST(ScaleDownErrors, EachFieldIsNamedWithItsValueAndALargestFactor) {
  const std::vector<FieldCase> cases = {
      {"", "", 3, "model.llm.hidden_size", "hidden_size 256 is not divisible by 3"},
      {"ffn_hidden_size: 1024", "ffn_hidden_size: 1020", 8, "model.llm.ffn_hidden_size",
       "ffn_hidden_size 1020 is not divisible by 8"},
      {"seq_length: 128", "seq_length: 96", 64, "model.llm.seq_length", "seq_length 96 is not divisible by 64"},
      {"", "", 128, "model.llm.hidden_size", "= 2 is not divisible by the 4 attention heads"},
      {"hidden_size: 128", "hidden_size: 96", 64, "model.encoders[0].transformer.hidden_size",
       "hidden_size 96 is not divisible by 64"},
      {"ffn_hidden_size: 512", "ffn_hidden_size: 500", 8, "model.encoders[0].transformer.ffn_hidden_size",
       "ffn_hidden_size 500 is not divisible by 8"},
      {"", "", 64, "model.encoders[0].transformer.seq_length",
       "the 64 tokens per image / 64 = 1 are not divisible by projector.token_merge 2"},
  };
  const std::string tiny = read_source(kTiny);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.field + " at " + std::to_string(c.factor));
    const std::string text = c.from.empty() ? tiny : replace_once(tiny, c.from, c.to);
    const Error e = scaled_error(text, c.factor);
    EXPECT_EQ(e.where().field, c.field);
    EXPECT_EQ(e.where().file, "test.pbtxt");
    EXPECT_GT(e.where().line, 0);  // the field's own line in the file
    EXPECT_THAT(neutral_options(e.problem()), HasSubstr("`scale-down " + std::to_string(c.factor) + "`: "));
    EXPECT_THAT(e.problem(), HasSubstr(c.problem));
    EXPECT_THAT(e.fix(), HasSubstr("the largest factor this scenario takes"));
  }
}

TEST(ScaleDownErrors, LocatedAtTheFieldsLine) {
  const std::string tiny = read_source(kTiny);
  const Error e = scaled_error(tiny, 3);
  EXPECT_EQ(e.where().line, line_of(tiny, "hidden_size: 256"));
  EXPECT_EQ(neutral_options(e.fix()), "use `scale-down 32`, the largest factor this scenario takes (valid: 2, 4, 8, 16, 32)");
}

TEST(ScaleDownErrors, ValidationAfterScalingSaysSo) {
  // CP 2 needs seq_length divisible by 2·cp = 4: 256 is, 256 / 128 = 2 is not.
  std::string text = read_source(kGpt);
  text = replace_once(text, "cp: 1", "cp: 2");
  text = replace_once(text, "dp: 2", "dp: 1");
  text = replace_once(text, "seq_length: 2048", "seq_length: 256");
  ASSERT_NO_THROW(parse_scenario(text, Format::kText, "test.pbtxt"));
  const Error e = scaled_error(text, 128);
  EXPECT_EQ(e.where().field, "parallel.cp");
  EXPECT_THAT(neutral_options(e.problem()), HasSubstr("after `scale-down 128`: seq_length 2 must be divisible by 2 × cp = 4"));
  EXPECT_THAT(neutral_options(e.fix()), HasSubstr("`scale-down 64` is the largest factor this scenario takes"));
}

TEST(ScaleDownErrors, TheFilesOwnProblemIsReportedAsBefore) {
  const std::string text = replace_once(read_source(kGpt), "tp: 2", "tp: 3");
  const Error plain = scaled_error(text, 1);
  const Error scaled = scaled_error(text, 2);
  EXPECT_EQ(scaled.what(), std::string(plain.what()));
  EXPECT_THAT(scaled.problem(), Not(HasSubstr("scale-down")));
}

TEST(ScaleDownErrors, NoFactorWorks) {
  // An odd hidden size: nothing above 1 divides it.
  std::string text = read_source(kGpt);
  text = replace_once(text, "hidden_size: 2048", "hidden_size: 2064");  // 16 heads of 129
  const Error e = scaled_error(text, 2);
  EXPECT_EQ(e.where().field, "model.llm.hidden_size");
  EXPECT_THAT(e.fix(), HasSubstr("no factor above 1 scales this scenario"));
}

// Every shipped scenario either scales by 2 and validates, or says why not
// with a lacuna::Error; never anything else. The list of those that cannot
// is pinned so that a new scenario's status is a decision.
TEST(ScaleDownShipped, EveryScenarioScalesByTwoOrSaysWhy) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(source_path("scenarios")))
    if (entry.is_regular_file()) files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 15u);
  std::vector<std::string> cannot;
  for (const auto& f : files) {
    SCOPED_TRACE(f);
    try {
      const auto s = load_scenario(f, 2);
      EXPECT_EQ(s.scale_down, 2);
    } catch (const Error& e) {
      cannot.push_back(std::filesystem::relative(f, source_path("")).string() + ": " + e.what());
    }
  }
  std::string shown;
  for (const auto& c : cannot) shown += c + "\n";
  EXPECT_TRUE(cannot.empty()) << shown;
}

}  // namespace
}  // namespace lacuna::scenario
