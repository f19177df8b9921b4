// Reading files: shipped scenarios, both syntaxes, and the errors of reading
// and parsing (with their line:column).
#include <google/protobuf/util/message_differencer.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "sim/scenario/test_support.h"

namespace lacuna::scenario {
namespace {

using ::testing::HasSubstr;
using testing::error_of;
using testing::line_of;
using testing::read_source;
using testing::replace_once;
using testing::source_path;

std::vector<std::string> shipped_files() {
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(source_path("scenarios")))
    if (entry.is_regular_file()) out.push_back(entry.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Shipped, EveryFileUnderScenariosLoads) {
  const auto files = shipped_files();
  EXPECT_GE(files.size(), 15u);
  for (const auto& f : files) {
    SCOPED_TRACE(f);
    EXPECT_NO_THROW(load_scenario(f));
  }
}

TEST(Shipped, Gpt3OnH100Layout) {
  const auto s = load_scenario(source_path("scenarios/llm/gpt3-175b-3072.pbtxt"));
  EXPECT_EQ(num_gpus(s.spec), 3072);
  EXPECT_EQ(num_microbatches(s.spec), 16);
  EXPECT_EQ(layers_per_virtual_stage(s.spec), std::vector<int64_t>(96, 1));
  EXPECT_EQ(s.spec.cluster().gpu().peak_bf16_tflops(), 989);
  EXPECT_EQ(s.spec.schedule().kind(), INTERLEAVED_1F1B);
  EXPECT_EQ(s.locations.locate("parallel.tp").line, line_of(read_source("scenarios/llm/gpt3-175b-3072.pbtxt"), "tp: 8"));
}

TEST(Shipped, PtdpRowsCarryThePublishedFigure) {
  const std::regex published(R"(published: (\d+) TFLOP/s per GPU \(PTD-P Table 1\))");
  const int expected[] = {137, 138, 142, 135, 138, 140, 148, 155, 163, 163};
  int row = 0;
  for (const auto& f : shipped_files()) {
    if (f.find("/validation/ptdp-") == std::string::npos) continue;
    const auto s = load_scenario(f);
    std::smatch m;
    ASSERT_TRUE(std::regex_match(s.spec.description(), m, published)) << f;
    ASSERT_LT(row, 10);
    EXPECT_EQ(std::stoi(m[1]), expected[row++]) << f;
    EXPECT_EQ(s.spec.cluster().preset(), "a100-80gb-sxm");
    EXPECT_EQ(s.spec.parallel().recompute(), RECOMPUTE_FULL);
    EXPECT_EQ(s.spec.model().llm().ffn_hidden_size(), 4 * s.spec.model().llm().hidden_size());
  }
  EXPECT_EQ(row, 10);
}

TEST(Shipped, TextAndJsonTwinsAreIdentical) {
  const auto text = load_scenario(source_path("scenarios/llm/gpt-1.3b-8gpu.pbtxt"));
  const auto json = load_scenario(source_path("scenarios/examples/gpt-1.3b-8gpu.json"));
  std::string diff;
  google::protobuf::util::MessageDifferencer d;
  d.ReportDifferencesToString(&diff);
  EXPECT_TRUE(d.Compare(text.spec, json.spec)) << diff;
  EXPECT_EQ(json.locations.locate("parallel.tp").line,
            line_of(read_source("scenarios/examples/gpt-1.3b-8gpu.json"), "\"tp\": 2"));
}

TEST(Json, SnakeCaseAndCamelCaseNamesAreBothAccepted) {
  std::string text = read_source("scenarios/examples/gpt-1.3b-8gpu.json");
  text = replace_once(text, "\"numLayers\"", "\"num_layers\"");
  text = replace_once(text, "\"globalBatch\"", "\"global_batch\"");
  const auto s = parse_scenario(text, Format::kJson, "x.json");
  EXPECT_EQ(s.spec.model().llm().num_layers(), 24);
  EXPECT_EQ(s.locations.locate("model.llm.num_layers").line, line_of(text, "\"num_layers\""));
  EXPECT_EQ(s.locations.locate("model.llm.hidden_size").line, line_of(text, "\"hiddenSize\""));
}

TEST(Files, MissingFile) {
  try {
    load_scenario("/nonexistent/scenario.pbtxt");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.where().file, "/nonexistent/scenario.pbtxt");
    EXPECT_THAT(e.problem(), HasSubstr("not found"));
  }
}

TEST(Files, DirectoryIsNotAScenario) {
  EXPECT_THROW(load_scenario(source_path("scenarios")), Error);
}

class TempFile {
 public:
  TempFile(const std::string& name, const std::string& content)
      : path_((std::filesystem::temp_directory_path() / name).string()) {
    std::ofstream(path_, std::ios::binary) << content;
  }
  ~TempFile() { std::filesystem::remove(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(Files, EmptyAndCommentOnlyFilesAreErrors) {
  TempFile empty("lacuna_scenario_empty.pbtxt", "");
  TempFile comments("lacuna_scenario_comments.pbtxt", "# nothing here\n  \n");
  TempFile json("lacuna_scenario_empty.json", " \n");
  for (const auto* f : {&empty, &comments, &json}) {
    try {
      load_scenario(f->path());
      ADD_FAILURE() << f->path();
    } catch (const Error& e) {
      EXPECT_THAT(e.problem(), HasSubstr("empty"));
    }
  }
}

TEST(Files, OversizedFileIsRejectedBeforeParsing) {
  TempFile big("lacuna_scenario_big.pbtxt", std::string((16u << 20) + 1, ' '));
  try {
    load_scenario(big.path());
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.problem(), HasSubstr("above the 16 MiB"));
  }
}

TEST(Files, FormatFollowsExtension) {
  TempFile json("lacuna_scenario_twin.JSON", read_source("scenarios/examples/gpt-1.3b-8gpu.json"));
  EXPECT_EQ(load_scenario(json.path()).spec.parallel().tp(), 2);
}

// ---- syntax errors carry line and column (1-based)

TEST(TextSyntax, UnknownField) {
  const std::string text = replace_once(read_source("scenarios/llm/gpt-1.3b-8gpu.pbtxt"), "  cp: 1", "  cpp: 1");
  const Error e = error_of(text, Format::kText);
  EXPECT_THAT(e.problem(), HasSubstr("cpp"));
  EXPECT_EQ(e.where().line, line_of(text, "cpp: 1"));
  EXPECT_GT(e.where().column, 0);  // protobuf points just after the name
}

TEST(TextSyntax, WrongType) {
  const std::string text = replace_once(read_source("scenarios/llm/gpt-1.3b-8gpu.pbtxt"), "tp: 2", "tp: \"two\"");
  const Error e = error_of(text, Format::kText);
  EXPECT_THAT(e.problem(), HasSubstr("integer"));
  EXPECT_EQ(e.where().line, line_of(text, "tp: \"two\""));
}

TEST(TextSyntax, UnknownEnumValue) {
  const std::string text = replace_once(read_source("scenarios/llm/gpt-1.3b-8gpu.pbtxt"), "kind: ONE_F_ONE_B", "kind: 1F1B");
  const Error e = error_of(text, Format::kText);
  EXPECT_EQ(e.where().line, line_of(text, "kind: 1F1B"));
}

TEST(TextSyntax, MissingBrace) {
  const std::string text = replace_once(read_source("scenarios/llm/gpt-1.3b-8gpu.pbtxt"), "schedule {", "schedule");
  const Error e = error_of(text, Format::kText);
  EXPECT_EQ(e.where().line, line_of(text, "kind: ONE_F_ONE_B"));
}

TEST(TextSyntax, InvalidUtf8IsLocated) {
  const std::string text = replace_once(read_source("scenarios/llm/gpt-1.3b-8gpu.pbtxt"), "gpt-1.3b\"", "gpt-\xff\"");
  const Error e = error_of(text, Format::kText);
  EXPECT_THAT(e.problem(), HasSubstr("UTF-8"));
  EXPECT_EQ(e.where().line, line_of(text, "gpt-\xff"));
}

struct JsonCase {
  std::string from, to, message, located;
};

TEST(JsonSyntax, ErrorsAreLocated) {
  const JsonCase cases[] = {
      {"\"tp\": 2,", "\"tp\": 2", "expected ',' or '}'", "\"sequenceParallel\""},
      {"\"tp\": 2,", "\"tpp\": 2,", "unknown field \"tpp\" in parallel", "\"tpp\""},
      {"\"tp\": 2,", "\"tp\": true,", "expected a number, found a boolean", "\"tp\""},
      {"\"tp\": 2,", "\"tp\": \"two\",", "expected an integer", "\"tp\""},
      {"\"tp\": 2,", "\"tp\": 2.5,", "expected an integer", "\"tp\""},
      {"\"tp\": 2,", "\"tp\": 99999999999999999999,", "out of range", "\"tp\""},
      {"\"tp\": 2,", "\"tp\": 2,,", "expected a \"key\"", ",,"},
      {"\"kind\": \"ONE_F_ONE_B\"", "\"kind\": \"1F1B\"", "unknown value \"1F1B\"", "\"1F1B\""},
      {"\"schedule\": {", "\"schedule\": [", "expected an object, found an array", "\"schedule\""},
      {"\"tp\": 2,", "\"tp\": 2, \"tp\": 2,", "appears twice", "\"tp\": 2, \"tp\""},
      {"\"tp\": 2,", "\"tp\": 2, 'x',", "expected a \"key\"", "'x'"},
  };
  const std::string base = read_source("scenarios/examples/gpt-1.3b-8gpu.json");
  for (const auto& c : cases) {
    SCOPED_TRACE(c.to);
    const std::string text = replace_once(base, c.from, c.to);
    const Error e = error_of(text, Format::kJson, "x.json");
    EXPECT_THAT(e.problem(), HasSubstr(c.message)) << e.what();
    EXPECT_EQ(e.where().line, line_of(text, c.located)) << e.what();
    EXPECT_GT(e.where().column, 0);
  }
}

TEST(JsonSyntax, ColumnIsOneBased) {
  const Error e = error_of("{\n  \"bogus\": 1}", Format::kJson, "x.json");
  EXPECT_EQ(e.where().line, 2);
  EXPECT_EQ(e.where().column, 3);
}

TEST(JsonSyntax, UnterminatedDocument) {
  const std::string base = read_source("scenarios/examples/gpt-1.3b-8gpu.json");
  const Error e = error_of(base.substr(0, base.rfind('}')), Format::kJson, "x.json");
  EXPECT_THAT(e.problem(), HasSubstr("unexpected end of file"));
}

TEST(JsonSyntax, DeepNestingFailsFast) {
  const std::string text = "{\"parallel\": {\"layersPerStage\": " + std::string(100000, '[');
  const Error e = error_of(text, Format::kJson, "x.json");
  EXPECT_EQ(e.where().line, 1);
}

}  // namespace
}  // namespace lacuna::scenario
