// Hardware presets and how a scenario's cluster settings sit on top of them.
#include <google/protobuf/util/message_differencer.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/cost/roofline.h"
#include "sim/proto/program.pb.h"
#include "sim/scenario/nvlink_domain.h"
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
  EXPECT_THAT(hardware_preset_names(),
              ElementsAre("a100-80gb-sxm", "b200", "gb200-nvl72", "gb300-nvl72", "h100-sxm", "h200-sxm"));
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
    const bool rack = name.starts_with("gb");
    // HGX/DGX: 8 GPUs and 8 rails per node; NVL72: 4-GPU trays with 4 NICs.
    EXPECT_EQ(c.gpus_per_node(), rack ? 4 : 8) << name;
    EXPECT_EQ(c.nics_per_node(), rack ? 4 : 8) << name;
    EXPECT_EQ(c.topology(), RAIL_OPTIMIZED);
    EXPECT_FALSE(c.has_num_nodes()) << "a preset describes a node, not a cluster size";
    // Unset on HGX presets: one NVLink domain per node.
    EXPECT_EQ(c.has_nvlink_domain_gpus(), rack) << name;
    EXPECT_TRUE(c.has_max_nvlink_domain_gpus()) << name;
    EXPECT_GE(c.max_nvlink_domain_gpus(), nvlink_domain_gpus(c)) << name;
    EXPECT_EQ(nvlink_domain_gpus(c) % c.gpus_per_node(), 0) << name;
  }
}

// Dense (no sparsity) datasheet peaks and the rack figures of the Blackwell
// presets (sources in presets.cpp and docs/hardware.md).
TEST(Presets, BlackwellFigures) {
  const auto& b200 = hardware_preset("b200");
  EXPECT_EQ(b200.gpu().peak_bf16_tflops(), 2250);
  EXPECT_EQ(b200.gpu().peak_fp8_tflops(), 4500);
  EXPECT_EQ(b200.gpu().peak_fp4_tflops(), 9000);
  EXPECT_EQ(b200.gpu().hbm_bandwidth_gb_per_s(), 7700);
  EXPECT_EQ(b200.gpu().hbm_capacity_gib(), 180);
  EXPECT_EQ(b200.max_nvlink_domain_gpus(), 8) << "HGX B200: no NVLink beyond the baseboard";
  EXPECT_EQ(nvlink_domain_gpus(b200), 8);
  const auto& gb200 = hardware_preset("gb200-nvl72");
  EXPECT_EQ(gb200.gpu().peak_bf16_tflops(), 2500);
  EXPECT_EQ(gb200.gpu().peak_fp8_tflops(), 5000);
  EXPECT_EQ(gb200.gpu().peak_fp4_tflops(), 10000);
  EXPECT_EQ(gb200.gpu().hbm_capacity_gib(), 186);
  EXPECT_EQ(gb200.nic().bandwidth_gb_per_s(), 50) << "ConnectX-7, 400 Gb/s";
  EXPECT_EQ(nodes_per_nvlink_domain(gb200), 18) << "18 compute trays per NVL72 rack";
  EXPECT_EQ(gb200.max_nvlink_domain_gpus(), 576) << "NVLink 5 switch limit";
  const auto& gb300 = hardware_preset("gb300-nvl72");
  EXPECT_EQ(gb300.gpu().peak_fp4_tflops(), 15000);
  EXPECT_EQ(gb300.gpu().peak_fp8_tflops(), 5000);
  EXPECT_EQ(gb300.nic().bandwidth_gb_per_s(), 100) << "ConnectX-8, 800 Gb/s";
  EXPECT_EQ(nvlink_domain_gpus(gb300), 72);
  for (const char* name : {"b200", "gb200-nvl72", "gb300-nvl72"}) {
    const auto& c = hardware_preset(name);
    EXPECT_TRUE(c.gpu().mx_formats()) << name;
    EXPECT_EQ(c.nvlink().bandwidth_gb_per_s(), 900) << name << ": NVLink 5, per direction";
    EXPECT_TRUE(c.nvls()) << name;
    EXPECT_DOUBLE_EQ(peak_flops_per_s(c.gpu(), FP8), 2 * peak_flops_per_s(c.gpu(), BF16)) << name;
  }
  for (const char* name : {"a100-80gb-sxm", "h100-sxm", "h200-sxm"})
    EXPECT_FALSE(hardware_preset(name).gpu().mx_formats()) << name;
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
    hardware_preset("mi300x");
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

TEST(Resolution, WithoutPresetEveryMissingFieldIsNamed) {
  const std::string text = replace_once(read_source(kSmall), "  preset: \"h100-sxm\"\n", "");
  const Error all = error_of(text, Format::kText);
  ASSERT_GT(all.parts().size(), 10u) << all.what();
  const Error& e = all.parts()[0];
  EXPECT_EQ(e.where().field, "cluster.gpus_per_node");
  EXPECT_EQ(e.fix(), "set it or use preset: \"h100-sxm\"");
  for (const char* field : {"cluster.gpu.hbm_bandwidth_gb_per_s", "cluster.nvlink.bandwidth_gb_per_s",
                            "cluster.host.kernel_launch_us", "cluster.memory_overheads.cuda_context_gib"}) {
    bool named = false;
    for (const Error& part : all.parts()) named |= part.where().field == field;
    EXPECT_TRUE(named) << field << "\n" << all.what();
  }
}

TEST(Resolution, PrecisionWithoutPeakAndNoPreset) {
  std::string text = read_source("scenarios/hardware/h100-node-no-preset.pbtxt");
  text = replace_once(text, "    peak_fp8_tflops: 1979\n", "");
  text = replace_once(text, "precision: BF16", "precision: FP8");
  const Error e = error_of(text, Format::kText);
  EXPECT_EQ(e.where().field, "cluster.gpu.peak_fp8_tflops");
}

// Predicted achieved TFLOP/s of one kernel under a preset, as lacuna times it.
double predicted_tflops(const std::string& preset, ir::OpClass cls, std::vector<int64_t> shape, double flops) {
  const cost::RooflineModel m(hardware_preset(preset).gpu(), BF16);
  ir::Compute op;
  op.set_op_class(cls);
  for (int64_t d : shape) op.add_shape(d);
  op.set_flops(flops);
  return flops / m.time(op).seconds() / 1e12;
}

// Every preset has a complete per-shape model, and it is not flat.
TEST(Presets, ShapeModelIsComplete) {
  for (const auto& name : hardware_preset_names()) {
    const KernelShapeModel& s = hardware_preset(name).gpu().shape_model();
    EXPECT_FALSE(s.has_flat() && s.flat()) << name;
    EXPECT_GE(s.gemm_tiles_size(), 2) << name;
    EXPECT_TRUE(s.has_gemm_ctas_per_sm() && s.has_gemm_k_overhead() && s.has_gemm_max_split_k()) << name;
    EXPECT_TRUE(s.has_attention_block_q() && s.has_attention_kv_overhead() && s.has_attention_head_dim_overhead())
        << name;
    const cost::KernelEfficiency e(s, hardware_preset(name).gpu().num_sms());
    EXPECT_TRUE(e.gemm_by_shape() && e.attention_by_shape()) << name;
  }
}

// GEMM flops efficiency is fitted to measured kernel tables (presets.cpp
// [FIT]; KernelFit.PresetsAreTheFitOfTheShippedTables checks the values).
// The best single GEMMs measured are checks: a training-shape fit sits at or
// below the best case, within the spread of the published measurements; and
// a GEMM's efficiency never exceeds the class's.
TEST(Presets, GemmEfficiencyIsWithinTheMeasuredSingleGemmFigures) {
  // A100: MAMF's best, 271.2 TFLOP/s at 1024×10240×5120 (stas00/ml-engineering).
  const double mamf = predicted_tflops("a100-80gb-sxm", ir::GEMM, {1024, 10240, 5120}, 2.0 * 1024 * 10240 * 5120);
  EXPECT_LE(mamf, 271.2);
  EXPECT_GE(mamf, 0.9 * 271.2);
  // H100 8192³: 661 (Triton's Gluon tutorial, cuBLAS), 681 (our own,
  // calib/measurements/lacuna-h100-gemm.kernels.csv), ≈798 (models-and-hardware.md §2).
  const double h100 = predicted_tflops("h100-sxm", ir::GEMM, {8192, 8192, 8192}, 2.0 * 8192 * 8192 * 8192);
  EXPECT_GE(h100, 661);
  EXPECT_LE(h100, 798);
  for (const auto& name : hardware_preset_names()) {
    const cost::RooflineModel m(hardware_preset(name).gpu(), BF16);
    const double cls = hardware_preset(name).gpu().efficiency().at("GEMM").flops();
    for (int64_t n : {512, 2048, 4096, 8192, 16384}) {
      ir::Compute op;
      op.set_op_class(ir::GEMM);
      for (int64_t d : {n, n, n}) op.add_shape(d);
      EXPECT_LE(m.flops_efficiency(op), cls) << name << " " << n;
      EXPECT_GT(m.flops_efficiency(op), 0) << name << " " << n;
    }
  }
}

// ATTENTION is derived from the published FlashAttention-2 (A100) and cuDNN
// (H100) forward+backward curves: lacuna's forward and backward kernels of
// the benchmark's largest non-causal hdim-128 point (batch 1, 16 heads,
// 16k) must give it back within the fit's residual (≤ 4 %).
TEST(Presets, AttentionEfficiencyReproducesItsSourceCurves) {
  auto fwd_bwd = [](const std::string& preset, double fwd_flops) {
    const double f = predicted_tflops(preset, ir::ATTENTION, {1, 16, 16384, 16384, 128, 0, 16}, fwd_flops);
    const double b = predicted_tflops(preset, ir::ATTENTION, {1, 16, 16384, 16384, 128, 0, 16}, 2.5 * fwd_flops);
    return 3.5 * fwd_flops / (fwd_flops / f + 2.5 * fwd_flops / b);
  };
  const double flops = 4.0 * 16384 * 16384 * 16 * 128;
  EXPECT_NEAR(fwd_bwd("a100-80gb-sxm", flops), 203, 0.04 * 203);  // FA2, A100 (Dao-AILab/flash-attention)
  EXPECT_NEAR(fwd_bwd("h100-sxm", flops), 536, 0.04 * 536);       // cuDNN, H100 (FA3 paper figures)
}

TEST(Resolution, ShapeModelFieldsOverrideOneByOne) {
  const auto s = load_with_cluster("  gpu { shape_model { gemm_k_overhead: 0 attention_block_q: 64 } }\n");
  const KernelShapeModel& m = s.cluster().gpu().shape_model();
  const KernelShapeModel& preset = hardware_preset("h100-sxm").gpu().shape_model();
  EXPECT_EQ(m.gemm_k_overhead(), 0);
  EXPECT_EQ(m.attention_block_q(), 64);
  EXPECT_EQ(m.attention_kv_overhead(), preset.attention_kv_overhead());
  EXPECT_EQ(m.gemm_tiles_size(), preset.gemm_tiles_size()) << "the preset's tiles are kept, not doubled";
  EXPECT_FALSE(m.has_flat());
}

TEST(Resolution, ScenarioTilesReplaceThePresetsList) {
  const auto s = load_with_cluster("  gpu { shape_model { gemm_tiles { m: 64 n: 64 ctas_per_sm: 4 } } }\n");
  const KernelShapeModel& m = s.cluster().gpu().shape_model();
  ASSERT_EQ(m.gemm_tiles_size(), 1);
  EXPECT_EQ(m.gemm_tiles(0).m(), 64);
  EXPECT_EQ(m.gemm_k_overhead(), hardware_preset("h100-sxm").gpu().shape_model().gemm_k_overhead());
}

TEST(Resolution, FlatSwitchOnAPreset) {
  const auto s = load_with_cluster("  gpu { shape_model { flat: true } }\n");
  EXPECT_TRUE(s.cluster().gpu().shape_model().flat());
  EXPECT_EQ(s.cluster().gpu().shape_model().gemm_tiles_size(),
            hardware_preset("h100-sxm").gpu().shape_model().gemm_tiles_size());
}

// Without a preset the shape model must be given, or switched off.
TEST(Resolution, WithoutPresetTheShapeModelIsRequired) {
  const std::string text = read_source("scenarios/hardware/h100-node-no-preset.pbtxt");
  const auto begin = text.find("    shape_model {");
  const auto end = text.find("    }\n", begin) + 6;
  ASSERT_NE(begin, std::string::npos);
  const std::string without = text.substr(0, begin) + text.substr(end);
  const Error e = error_of(without, Format::kText);
  EXPECT_EQ(e.where().field, "cluster.gpu.shape_model.gemm_tiles");
  EXPECT_EQ(e.problem(), "is not set");
  EXPECT_THAT(e.fix(), HasSubstr("flat: true"));
  // `flat: true` alone is enough.
  const std::string flat = text.substr(0, begin) + "    shape_model { flat: true }\n" + text.substr(end);
  EXPECT_TRUE(parse_scenario(flat, Format::kText, "t.pbtxt").spec.cluster().gpu().shape_model().flat());
  // A missing field in a given model is named.
  EXPECT_EQ(error_of(replace_once(text, "      gemm_k_overhead: 47\n", ""), Format::kText).where().field,
            "cluster.gpu.shape_model.gemm_k_overhead");
}

TEST(Resolution, ShapeModelRangesAreChecked) {
  EXPECT_EQ(error_of(replace_once(read_source("scenarios/hardware/h100-node-no-preset.pbtxt"),
                                  "gemm_tiles { m: 128 n: 128 }", "gemm_tiles { m: 128 n: 0 }"),
                     Format::kText)
                .where()
                .field,
            "cluster.gpu.shape_model.gemm_tiles[1].n");
  EXPECT_EQ(error_of(replace_once(read_source("scenarios/hardware/h100-node-no-preset.pbtxt"),
                                  "attention_kv_overhead: 284", "attention_kv_overhead: -1"),
                     Format::kText)
                .where()
                .field,
            "cluster.gpu.shape_model.attention_kv_overhead");
  EXPECT_EQ(error_of(replace_once(read_source(kSmall), "  num_nodes: 1\n",
                                  "  num_nodes: 1\n  gpu { shape_model { gemm_max_split_k: 0 } }\n"),
                     Format::kText)
                .where()
                .field,
            "cluster.gpu.shape_model.gemm_max_split_k");
}

}  // namespace
}  // namespace lacuna::scenario
