// Hardware presets and how a scenario's cluster settings sit on top of them.
#include <google/protobuf/util/message_differencer.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/proto/program.pb.h"
#include "sim/scenario/test_support.h"

namespace lacuna::scenario {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::error_of;
using testing::read_source;
using testing::replace_once;
using testing::source_path;

TEST(Presets, NamesAndDatasheetFigures) {
  EXPECT_THAT(hardware_preset_names(), ElementsAre("a100-80gb-sxm", "h100-sxm", "h200-sxm"));
  const auto& a100 = hardware_preset("a100-80gb-sxm");
  EXPECT_EQ(a100.gpu().peak_bf16_tflops(), 312);
  EXPECT_FALSE(a100.gpu().has_peak_fp8_tflops());
  EXPECT_EQ(a100.gpu().hbm_bandwidth_gb_per_s(), 2039);
  EXPECT_EQ(a100.nvlink().bandwidth_gb_per_s(), 300);
  EXPECT_FALSE(a100.nvls());
  EXPECT_EQ(a100.nic().bandwidth_gb_per_s(), 25);
  const auto& h100 = hardware_preset("h100-sxm");
  EXPECT_EQ(h100.gpu().peak_fp8_tflops(), 1979);
  EXPECT_EQ(h100.gpu().num_sms(), 132);
  EXPECT_TRUE(h100.nvls());
  EXPECT_EQ(h100.nic().bandwidth_gb_per_s(), 50);
  const auto& h200 = hardware_preset("h200-sxm");
  EXPECT_EQ(h200.gpu().hbm_capacity_gib(), 141);
  EXPECT_EQ(h200.gpu().hbm_bandwidth_gb_per_s(), 4800);
  for (const auto& name : hardware_preset_names()) {
    const auto& c = hardware_preset(name);
    EXPECT_EQ(c.preset(), name);
    EXPECT_EQ(c.gpus_per_node(), 8);
    EXPECT_EQ(c.nics_per_node(), 8);
    EXPECT_EQ(c.topology(), RAIL_OPTIMIZED);
    EXPECT_FALSE(c.has_num_nodes()) << "a preset describes a node, not a cluster size";
  }
}

TEST(Presets, EveryOpClassHasAnEfficiencyEntry) {
  const auto* classes = ir::OpClass_descriptor();
  for (const auto& name : hardware_preset_names()) {
    const auto& eff = hardware_preset(name).gpu().efficiency();
    EXPECT_TRUE(eff.count("DEFAULT"));
    for (int i = 0; i < classes->value_count(); ++i) {
      if (classes->value(i)->number() == 0) continue;
      EXPECT_TRUE(eff.count(classes->value(i)->name())) << name << " " << classes->value(i)->name();
      const auto e = op_efficiency(hardware_preset(name).gpu(), classes->value(i)->name());
      EXPECT_GT(e.flops, 0);
      EXPECT_LE(e.flops, 1);
      EXPECT_GT(e.memory, 0);
      EXPECT_LE(e.memory, 1);
    }
  }
}

TEST(Presets, UnknownNameListsTheKnownOnes) {
  try {
    hardware_preset("b200");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.fix(), HasSubstr("\"h100-sxm\""));
  }
}

TEST(Presets, PeakFlops) {
  EXPECT_DOUBLE_EQ(peak_flops_per_s(hardware_preset("h100-sxm").gpu(), BF16), 989e12);
  EXPECT_DOUBLE_EQ(peak_flops_per_s(hardware_preset("h100-sxm").gpu(), FP8), 1979e12);
  EXPECT_DOUBLE_EQ(peak_flops_per_s(hardware_preset("a100-80gb-sxm").gpu(), FP16), 312e12);
  EXPECT_THROW(peak_flops_per_s(hardware_preset("a100-80gb-sxm").gpu(), FP8), Error);
  EXPECT_THROW(peak_flops_per_s(hardware_preset("a100-80gb-sxm").gpu(), PRECISION_UNSPECIFIED), Error);
}

TEST(OpEfficiency, SubfieldsFallBackToDefault) {
  GpuSpec g;
  (*g.mutable_efficiency())["DEFAULT"].set_flops(0.5);
  (*g.mutable_efficiency())["DEFAULT"].set_memory(0.7);
  (*g.mutable_efficiency())["GELU"].set_memory(0.9);
  EXPECT_EQ(op_efficiency(g, "GELU").memory, 0.9);
  EXPECT_EQ(op_efficiency(g, "GELU").flops, 0.5);
  EXPECT_EQ(op_efficiency(g, "GEMM").flops, 0.5);
  EXPECT_EQ(op_efficiency(g, "GEMM").memory, 0.7);
}

const std::string kSmall = "scenarios/llm/gpt-1.3b-8gpu.pbtxt";

Scenario load_with_cluster(const std::string& cluster_lines) {
  const std::string text =
      replace_once(read_source(kSmall), "  num_nodes: 1\n", "  num_nodes: 1\n" + cluster_lines);
  return parse_scenario(text, Format::kText, "t.pbtxt").spec;
}

TEST(Resolution, SetFieldsOverrideUnsetFieldsKeepThePreset) {
  const auto s = load_with_cluster(
      "  gpu { hbm_capacity_gib: 94 kernel_overhead_us: 0 }\n"
      "  nic { bandwidth_gb_per_s: 25 }\n"
      "  nvls: false\n");
  const auto& c = s.cluster();
  const auto& preset = hardware_preset("h100-sxm");
  EXPECT_EQ(c.gpu().hbm_capacity_gib(), 94);
  EXPECT_TRUE(c.gpu().has_kernel_overhead_us());
  EXPECT_EQ(c.gpu().kernel_overhead_us(), 0) << "an explicit 0 overrides";
  EXPECT_FALSE(c.nvls()) << "an explicit false overrides";
  EXPECT_EQ(c.nic().bandwidth_gb_per_s(), 25);
  EXPECT_EQ(c.nic().latency_us(), preset.nic().latency_us());
  EXPECT_EQ(c.nic().efficiency(), preset.nic().efficiency());
  EXPECT_EQ(c.gpu().peak_bf16_tflops(), preset.gpu().peak_bf16_tflops());
  EXPECT_EQ(c.gpu().name(), preset.gpu().name());
  EXPECT_EQ(c.num_nodes(), 1);
}

TEST(Resolution, EfficiencyMapMergesPerKeyAndSubfield) {
  const auto s = load_with_cluster(
      "  gpu {\n"
      "    efficiency { key: \"GEMM\" value { flops: 0.6 } }\n"
      "    efficiency { key: \"ATTENTION\" value { memory: 0.5 } }\n"
      "  }\n");
  const auto& eff = s.cluster().gpu().efficiency();
  const auto& preset = hardware_preset("h100-sxm").gpu().efficiency();
  EXPECT_EQ(eff.at("GEMM").flops(), 0.6);
  EXPECT_EQ(eff.at("GEMM").memory(), preset.at("GEMM").memory()) << "unset subfield keeps the preset's";
  EXPECT_EQ(eff.at("ATTENTION").memory(), 0.5);
  EXPECT_EQ(eff.at("ATTENTION").flops(), preset.at("ATTENTION").flops());
  EXPECT_EQ(eff.at("LAYERNORM").memory(), preset.at("LAYERNORM").memory()) << "other keys kept";
  EXPECT_EQ(eff.size(), preset.size());
}

TEST(Resolution, FullySpelledOutClusterEqualsThePreset) {
  auto spelled = load_scenario(source_path("scenarios/hardware/h100-node-no-preset.pbtxt")).spec.cluster();
  Cluster preset = hardware_preset("h100-sxm");
  preset.clear_preset();
  preset.set_num_nodes(1);
  std::string diff;
  google::protobuf::util::MessageDifferencer d;
  d.ReportDifferencesToString(&diff);
  EXPECT_TRUE(d.Compare(spelled, preset)) << diff;
}

TEST(Resolution, WithoutPresetTheFirstMissingFieldIsNamed) {
  const std::string text = replace_once(read_source(kSmall), "  preset: \"h100-sxm\"\n", "");
  const Error e = error_of(text, Format::kText);
  EXPECT_EQ(e.where().field, "cluster.gpus_per_node");
  EXPECT_EQ(e.fix(), "set it or use preset: \"h100-sxm\"");
}

TEST(Resolution, PrecisionWithoutPeakAndNoPreset) {
  std::string text = read_source("scenarios/hardware/h100-node-no-preset.pbtxt");
  text = replace_once(text, "    peak_fp8_tflops: 1979\n", "");
  text = replace_once(text, "precision: BF16", "precision: FP8");
  const Error e = error_of(text, Format::kText);
  EXPECT_EQ(e.where().field, "cluster.gpu.peak_fp8_tflops");
}

}  // namespace
}  // namespace lacuna::scenario
