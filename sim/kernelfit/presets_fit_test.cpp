// The shipped presets take their kernel efficiencies from the fit to the
// measured kernel tables (sim/scenario/presets.cpp, [FIT]): re-running the
// fit on calib/measurements/ must give every [FIT] value, to the precision
// the preset writes it with, so that a preset cannot drift from its data.
#include <cmath>

#include <gtest/gtest.h>

#include "sim/kernelfit/efficiency_fit.h"
#include "sim/scenario/scenario.h"

namespace lacuna::kernelfit {
namespace {

std::vector<MeasuredKernel> tables(const std::vector<std::string>& names) {
  std::vector<MeasuredKernel> rows;
  for (const std::string& n : names) {
    auto more = read_measured_table(std::string(LACUNA_SOURCE_DIR) + "/calib/measurements/" + n);
    rows.insert(rows.end(), more.begin(), more.end());
  }
  return rows;
}

double round2(double v) { return std::round(v * 100) / 100; }

void expect_preset_is_fit(const std::string& preset, const std::vector<std::string>& names) {
  SCOPED_TRACE(preset);
  const scenario::GpuSpec g = scenario::hardware_preset(preset).gpu();
  const FitParams p = fit(g, tables(names));
  ASSERT_TRUE(p.gemm_flops && p.gemm_k_overhead && p.gemm_max_split_k);
  EXPECT_DOUBLE_EQ(g.efficiency().at("GEMM").flops(), round2(*p.gemm_flops));
  EXPECT_DOUBLE_EQ(g.shape_model().gemm_k_overhead(), std::round(*p.gemm_k_overhead));
  EXPECT_EQ(g.shape_model().gemm_max_split_k(), *p.gemm_max_split_k);
  if (p.gemm_fp8_flops) EXPECT_DOUBLE_EQ(g.efficiency().at("GEMM_FP8").flops(), round2(*p.gemm_fp8_flops));
  for (const auto& [c, v] : p.memory)
    EXPECT_DOUBLE_EQ(g.efficiency().at(ir::OpClass_Name(c)).memory(), round2(v)) << ir::OpClass_Name(c);
  EXPECT_GE(p.memory.size(), 5u);
}

TEST(KernelFit, PresetsAreTheFitOfTheShippedTables) {
  expect_preset_is_fit("a100-80gb-sxm", {"vidur-a100.kernels.csv"});
  expect_preset_is_fit("h100-sxm", {"vidur-h100.kernels.csv", "lacuna-h100-gemm.kernels.csv"});
}

TEST(KernelFit, GpusWithoutTablesTakeTheStatedTransferRule) {
  // H200 (same die) and the Blackwell presets take Hopper's fitted fractions
  // (docs/cost-model.md#gpus-without-measurements); H100 LayerNorm, never
  // measured long enough, takes the A100's fraction.
  const scenario::GpuSpec h100 = scenario::hardware_preset("h100-sxm").gpu();
  for (const char* other : {"h200-sxm", "b200", "gb200-nvl72", "gb300-nvl72"}) {
    SCOPED_TRACE(other);
    const scenario::GpuSpec g = scenario::hardware_preset(other).gpu();
    for (const auto& [key, e] : h100.efficiency()) {
      EXPECT_DOUBLE_EQ(g.efficiency().at(key).flops(), e.flops()) << key;
      EXPECT_DOUBLE_EQ(g.efficiency().at(key).memory(), e.memory()) << key;
    }
    EXPECT_DOUBLE_EQ(g.shape_model().gemm_k_overhead(), h100.shape_model().gemm_k_overhead());
    EXPECT_EQ(g.shape_model().gemm_max_split_k(), h100.shape_model().gemm_max_split_k());
  }
  EXPECT_DOUBLE_EQ(h100.efficiency().at("LAYERNORM").memory(),
                   scenario::hardware_preset("a100-80gb-sxm").gpu().efficiency().at("LAYERNORM").memory());
}

}  // namespace
}  // namespace lacuna::kernelfit
