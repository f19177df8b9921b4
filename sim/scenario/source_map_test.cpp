// Where fields stand: dotted paths, repeated indices, map keys, fallbacks.
#include <gtest/gtest.h>

#include "sim/scenario/parse.h"
#include "sim/scenario/test_support.h"

namespace lacuna::scenario {
namespace {

using testing::line_of;

TEST(SourceMap, MissingFieldFallsBackToNearestAncestor) {
  SourceMap m;
  m.set_file("f.pbtxt");
  m.add("cluster", 3, 1);
  m.add("cluster.gpu.efficiency[GEMM]", 7, 5);
  EXPECT_EQ(m.locate("cluster.gpu.efficiency[GEMM].flops").line, 7);
  EXPECT_EQ(m.locate("cluster.gpu.efficiency[ATTENTION].flops").line, 3);
  EXPECT_EQ(m.locate("cluster.nic.latency_us").line, 3);
  const auto none = m.locate("training.precision");
  EXPECT_EQ(none.line, 0);
  EXPECT_EQ(none.file, "f.pbtxt");
  EXPECT_EQ(none.field, "training.precision");
}

TEST(SourceMap, FirstOccurrenceWins) {
  SourceMap m;
  m.add("a", 1, 1);
  m.add("a", 9, 1);
  EXPECT_EQ(m.locate("a").line, 1);
}

const char* kText = R"(name: "x"
cluster {
  gpu {
    efficiency {
      key: "GEMM"
      value {
        flops: 0.5
      }
    }
    efficiency { key: "DEFAULT" value { memory: 0.25 } }
  }
}
parallel {
  layers_per_stage: 3
  layers_per_stage: 4
  layers_per_stage: 5
}
)";

TEST(TextLocations, NestedFieldsRepeatedIndicesAndMapKeys) {
  SourceMap m;
  m.set_file("t");
  const Scenario s = parse_text_format(kText, m);
  EXPECT_EQ(s.parallel().layers_per_stage_size(), 3);
  EXPECT_EQ(m.locate("name").line, 1);
  EXPECT_EQ(m.locate("cluster.gpu").line, 3);
  EXPECT_EQ(m.locate("cluster.gpu.efficiency[GEMM]").line, 4);
  EXPECT_EQ(m.locate("cluster.gpu.efficiency[GEMM].flops").line, 7);
  EXPECT_EQ(m.locate("cluster.gpu.efficiency[GEMM].flops").column, 9);
  EXPECT_EQ(m.locate("cluster.gpu.efficiency[DEFAULT].memory").line, 10);
  EXPECT_EQ(m.locate("parallel.layers_per_stage[0]").line, 14);
  EXPECT_EQ(m.locate("parallel.layers_per_stage[2]").line, 16);
}

TEST(TextLocations, ListSyntaxLocatesElementsAtTheList) {
  SourceMap m;
  const std::string text = "parallel {\n  tp: 1\n  layers_per_stage: [1, 2, 3]\n}\n";
  parse_text_format(text, m);
  EXPECT_EQ(m.locate("parallel.layers_per_stage[2]").line, 3);
}

TEST(JsonLocations, NestedFieldsArraysAndMapKeys) {
  const std::string text =
      "{\n"
      " \"cluster\": {\"gpu\": {\"efficiency\": {\n"
      "   \"GEMM\": {\"flops\": 0.5},\n"
      "   \"DEFAULT\": {\n"
      "     \"memory\": 0.25}}}},\n"
      " \"parallel\": {\"layers_per_stage\": [\n"
      "   3,\n"
      "   4]}\n"
      "}\n";
  SourceMap m;
  const Scenario s = parse_json_format(text, m);
  EXPECT_EQ(s.cluster().gpu().efficiency().at("GEMM").flops(), 0.5);
  EXPECT_EQ(m.locate("cluster.gpu.efficiency[GEMM].flops").line, 3);
  EXPECT_EQ(m.locate("cluster.gpu.efficiency[GEMM].flops").column, 13);
  EXPECT_EQ(m.locate("cluster.gpu.efficiency[DEFAULT].memory").line, 5);
  EXPECT_EQ(m.locate("parallel.layers_per_stage[1]").line, 8);
  EXPECT_EQ(m.locate("parallel.layers_per_stage").line, line_of(text, "\"layers_per_stage\""));
}

}  // namespace
}  // namespace lacuna::scenario
