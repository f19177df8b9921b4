// Megatron-LM's uneven pipeline (parallel.first_stage_layers /
// last_stage_layers, docs/scenario.md#parallel): the first / last pipeline
// rank holds the given layers, the other ranks split the rest evenly, each
// rank's layers split evenly over its model chunks; every combination
// Megatron-core rejects is an error naming file, line and field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/scenario/test_support.h"

namespace lacuna::scenario {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using testing::error_of;
using testing::line_of;
using testing::replace_once;

Scenario plan(int64_t layers, int64_t pp, int64_t v, std::optional<int64_t> first, std::optional<int64_t> last) {
  Scenario s;
  s.mutable_model()->mutable_llm()->set_num_layers(layers);
  s.mutable_parallel()->set_pp(pp);
  s.mutable_parallel()->set_virtual_stages(v);
  if (first) s.mutable_parallel()->set_first_stage_layers(*first);
  if (last) s.mutable_parallel()->set_last_stage_layers(*last);
  return s;
}

TEST(UnevenStages, FirstAndLastGetTheirLayersTheRestSplitsEvenly) {
  // 16 layers on pp 4: 1 first, 3 last, (16 − 4) / 2 = 6 on each middle rank.
  EXPECT_THAT(layers_per_virtual_stage(plan(16, 4, 1, 1, 3)), ElementsAre(1, 6, 6, 3));
  // Only the first: (16 − 1) / 3 = 5 on the others.
  EXPECT_THAT(layers_per_virtual_stage(plan(16, 4, 1, 1, std::nullopt)), ElementsAre(1, 5, 5, 5));
  // Only the last.
  EXPECT_THAT(layers_per_virtual_stage(plan(16, 4, 1, std::nullopt, 1)), ElementsAre(5, 5, 5, 1));
  // pp 2 with both: nothing in between.
  EXPECT_THAT(layers_per_virtual_stage(plan(8, 2, 1, 3, 5)), ElementsAre(3, 5));
  // Neither: the even split.
  EXPECT_THAT(layers_per_virtual_stage(plan(16, 4, 1, std::nullopt, std::nullopt)), ElementsAre(4, 4, 4, 4));
}

TEST(UnevenStages, EachRanksLayersSplitOverItsModelChunks) {
  // 22 layers, pp 4 × 2 chunks: rank 0 holds 2 (1 per chunk), rank 3 holds 4
  // (2 per chunk), ranks 1 and 2 (22 − 6) / 2 = 8 (4 per chunk). Virtual
  // stage k sits on rank k mod pp.
  const std::vector<int64_t> per_stage = layers_per_virtual_stage(plan(22, 4, 2, 2, 4));
  EXPECT_THAT(per_stage, ElementsAre(1, 4, 4, 2, 1, 4, 4, 2));
  int64_t sum = 0;
  for (int64_t n : per_stage) sum += n;
  EXPECT_EQ(sum, 22);
}

// A valid scenario on one 8-GPU node: 16 layers, TP 2 × PP 4, 8 microbatches.
const std::string kFile = "uneven.pbtxt";
const std::string kBase = R"(name: "uneven"
model {
  llm {
    name: "gpt-small"
    num_layers: 16
    hidden_size: 1024
    num_attention_heads: 16
    num_kv_heads: 16
    ffn_hidden_size: 4096
    activation: GELU
    norm: LAYERNORM
    vocab_size: 32000
    seq_length: 1024
    linear_bias: true
    position_embedding: POSITION_LEARNED
  }
}
cluster {
  preset: "h100-sxm"
  num_nodes: 1
}
parallel {
  tp: 2
  sequence_parallel: true
  cp: 1
  pp: 4
  dp: 1
  virtual_stages: 1
  first_stage_layers: 1
  last_stage_layers: 3
}
schedule {
  kind: ONE_F_ONE_B
}
training {
  global_batch: 16
  micro_batch: 2
  precision: BF16
}
)";

TEST(UnevenStages, ValidFileLoads) {
  const LoadedScenario ls = parse_scenario(kBase, Format::kText, kFile);
  EXPECT_THAT(layers_per_virtual_stage(ls.spec), ElementsAre(1, 6, 6, 3));
  // Interleaved: 22 layers, 2 chunks per rank, m = 8 a multiple of pp.
  std::string text = kBase;
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"num_layers: 16", "num_layers: 22"},
           {"virtual_stages: 1", "virtual_stages: 2"},
           {"kind: ONE_F_ONE_B", "kind: INTERLEAVED_1F1B"},
           {"first_stage_layers: 1", "first_stage_layers: 2"},
           {"last_stage_layers: 3", "last_stage_layers: 4"}})
    text = replace_once(text, from, to);
  const LoadedScenario interleaved = parse_scenario(text, Format::kText, kFile);
  EXPECT_THAT(layers_per_virtual_stage(interleaved.spec), ElementsAreArray({1, 4, 4, 2, 1, 4, 4, 2}));
}

struct Reject {
  std::string name;
  std::vector<std::pair<std::string, std::string>> edits;
  std::string field;
  std::string message;
  std::string located;
};

void PrintTo(const Reject& r, std::ostream* os) { *os << r.name; }

class UnevenStagesRejection : public ::testing::TestWithParam<Reject> {};

TEST_P(UnevenStagesRejection, NamesFileLineAndField) {
  const Reject& r = GetParam();
  std::string text = kBase;
  for (const auto& [from, to] : r.edits) text = replace_once(text, from, to);
  const Error e = error_of(text, Format::kText, kFile);
  EXPECT_EQ(e.where().field, r.field) << e.what();
  EXPECT_EQ(e.where().file, kFile) << e.what();
  EXPECT_EQ(e.where().line, line_of(text, r.located)) << e.what();
  EXPECT_THAT(e.problem(), HasSubstr(r.message)) << e.what();
  EXPECT_FALSE(e.fix().empty()) << e.what();
}

const Reject kRejections[] = {
    {"with_layers_per_stage",
     {{"virtual_stages: 1", "virtual_stages: 1\n  layers_per_stage: [1, 6, 6, 3]"}},
     "parallel.first_stage_layers",
     "first_stage_layers / last_stage_layers and layers_per_stage both set",
     "first_stage_layers: 1"},
    // pp 1: tp 2 × dp 4.
    {"without_pipeline",
     {{"pp: 4", "pp: 1"}, {"dp: 1", "dp: 4"}},
     "parallel.first_stage_layers",
     "needs pipeline parallelism (pp is 1)",
     "first_stage_layers: 1"},
    {"last_only_without_pipeline",
     {{"pp: 4", "pp: 1"}, {"dp: 1", "dp: 4"}, {"  first_stage_layers: 1\n", ""}},
     "parallel.last_stage_layers",
     "needs pipeline parallelism (pp is 1)",
     "last_stage_layers: 3"},
    {"first_zero",
     {{"first_stage_layers: 1", "first_stage_layers: 0"}},
     "parallel.first_stage_layers",
     "must be between 1 and num_layers (16), got 0",
     "first_stage_layers: 0"},
    {"last_above_num_layers",
     {{"last_stage_layers: 3", "last_stage_layers: 17"}},
     "parallel.last_stage_layers",
     "must be between 1 and num_layers (16), got 17",
     "last_stage_layers: 17"},
    // Interleaved, 2 chunks per rank: 3 layers do not split over 2 chunks.
    {"last_not_a_multiple_of_chunks",
     {{"num_layers: 16", "num_layers: 22"},
      {"virtual_stages: 1", "virtual_stages: 2"},
      {"kind: ONE_F_ONE_B", "kind: INTERLEAVED_1F1B"},
      {"first_stage_layers: 1", "first_stage_layers: 2"}},
     "parallel.last_stage_layers",
     "3 layers do not split over the stage's 2 model chunks",
     "last_stage_layers: 3"},
    // (16 − 2) over the 3 other ranks.
    {"rest_does_not_split",
     {{"first_stage_layers: 1", "first_stage_layers: 2"}, {"  last_stage_layers: 3\n", ""}},
     "parallel.first_stage_layers",
     "the other 3 stages would get 14 layers, which do not split evenly into 3 × 1 model chunks",
     "first_stage_layers: 2"},
    // 24 − 2 − 4 = 18 layers over the 2 middle ranks: 9 each, which do not
    // split over their 2 chunks.
    {"rest_does_not_split_over_chunks",
     {{"num_layers: 16", "num_layers: 24"},
      {"virtual_stages: 1", "virtual_stages: 2"},
      {"kind: ONE_F_ONE_B", "kind: INTERLEAVED_1F1B"},
      {"first_stage_layers: 1", "first_stage_layers: 2"},
      {"last_stage_layers: 3", "last_stage_layers: 4"}},
     "parallel.first_stage_layers",
     "the other 2 stages would get 18 layers, which do not split evenly into 2 × 2 model chunks",
     "first_stage_layers: 2"},
    // pp 2 (tp 2 × dp 2): first and last must hold every layer.
    {"pp2_not_covering_all_layers",
     {{"pp: 4", "pp: 2"}, {"dp: 1", "dp: 2"}, {"first_stage_layers: 1", "first_stage_layers: 4"}},
     "parallel.first_stage_layers",
     "the other 0 stages would get 9 layers",
     "first_stage_layers: 4"},
    {"more_than_num_layers",
     {{"first_stage_layers: 1", "first_stage_layers: 10"}, {"last_stage_layers: 3", "last_stage_layers: 10"}},
     "parallel.first_stage_layers",
     "the other 2 stages would get -4 layers",
     "first_stage_layers: 10"},
};

INSTANTIATE_TEST_SUITE_P(Scenario, UnevenStagesRejection, ::testing::ValuesIn(kRejections),
                         [](const ::testing::TestParamInfo<Reject>& info) { return info.param.name; });

}  // namespace
}  // namespace lacuna::scenario
