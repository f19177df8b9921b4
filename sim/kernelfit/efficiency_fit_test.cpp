#include "sim/kernelfit/efficiency_fit.h"

#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "sim/kernelfit/fit_report.h"
#include "sim/scenario/scenario.h"

namespace lacuna::kernelfit {
namespace {

MeasuredKernel row(ir::OpClass c, Pass p, std::vector<int64_t> shape, const std::string& group,
                   scenario::Precision dtype = scenario::BF16) {
  MeasuredKernel k;
  k.gpu = "h100-sxm";
  k.op_class = c;
  k.pass = p;
  k.dtype = dtype;
  k.shape = std::move(shape);
  k.group = group;
  return k;
}

// A table of transformer-like kernels timed by `truth` exactly (to the
// roofline's nanosecond), in three groups.
std::vector<MeasuredKernel> synthetic(const scenario::GpuSpec& truth, bool with_fp8) {
  std::vector<MeasuredKernel> rows;
  const std::vector<std::string> groups = {"a", "b", "c"};
  int gi = 0;
  for (int64_t tokens : {1024, 2048, 4096, 8192}) {
    for (int64_t h : {2048, 4096, 5120, 8192}) {
      const std::string& g = groups[static_cast<size_t>(gi++ % 3)];
      rows.push_back(row(ir::GEMM, Pass::kForward, {tokens, 3 * h, h}, g));
      rows.push_back(row(ir::GEMM, Pass::kDgrad, {tokens, h, h / 2}, g));
      rows.push_back(row(ir::GEMM, Pass::kWgrad, {h, 4 * h, tokens}, g));
      if (with_fp8) rows.push_back(row(ir::GEMM, Pass::kForward, {tokens, 4 * h, h}, g, scenario::FP8));
      rows.push_back(row(ir::RMSNORM, Pass::kForward, {tokens, h}, g));
      rows.push_back(row(ir::RMSNORM, Pass::kDgrad, {tokens, h}, g));
      rows.push_back(row(ir::SWIGLU, Pass::kForward, {tokens, 3 * h}, g));
      rows.push_back(row(ir::RESIDUAL_ADD, Pass::kForward, {tokens * h}, g));
    }
  }
  for (MeasuredKernel& k : rows) k.time_us = predict_s(truth, k) * 1e6;
  return rows;
}

scenario::GpuSpec truth_gpu() {
  scenario::GpuSpec g = scenario::hardware_preset("h100-sxm").gpu();
  FitParams p;
  p.gemm_flops = 0.71;
  p.gemm_k_overhead = 300;
  p.gemm_fp8_flops = 0.55;
  p.memory[ir::RMSNORM] = 0.42;
  p.memory[ir::SWIGLU] = 0.63;
  p.memory[ir::RESIDUAL_ADD] = 0.88;
  return apply(g, p);
}

TEST(EfficiencyFit, RecoversKnownParametersFromASyntheticTable) {
  const scenario::GpuSpec truth = truth_gpu();
  const auto rows = synthetic(truth, /*with_fp8=*/true);
  // Start from the preset as shipped: every fitted value differs from the truth.
  const FitParams p = fit(scenario::hardware_preset("h100-sxm").gpu(), rows);
  ASSERT_TRUE(p.gemm_flops && p.gemm_k_overhead && p.gemm_fp8_flops);
  EXPECT_NEAR(*p.gemm_flops, 0.71, 0.71 * 0.005);
  EXPECT_NEAR(*p.gemm_k_overhead, 300, 300 * 0.05);
  EXPECT_NEAR(*p.gemm_fp8_flops, 0.55, 0.55 * 0.005);
  EXPECT_NEAR(p.memory.at(ir::RMSNORM), 0.42, 0.42 * 0.005);
  EXPECT_NEAR(p.memory.at(ir::SWIGLU), 0.63, 0.63 * 0.005);
  EXPECT_NEAR(p.memory.at(ir::RESIDUAL_ADD), 0.88, 0.88 * 0.005);
  EXPECT_FALSE(p.attention_flops.has_value());  // no attention rows: the preset's value stays
}

TEST(EfficiencyFit, HeldOutErrorsOfAnExactTableAreSmall) {
  const auto rows = synthetic(truth_gpu(), /*with_fp8=*/false);
  const FitReport r = fit_and_validate(scenario::hardware_preset("h100-sxm").gpu(), rows);
  EXPECT_TRUE(r.folds_are_groups);
  EXPECT_EQ(r.folds.size(), 3u);
  ASSERT_EQ(r.scored.size(), rows.size());
  const ErrorStats held = stats_of(r, Which::kHeldOut, [](const MeasuredKernel&) { return true; });
  const ErrorStats before = stats_of(r, Which::kBefore, [](const MeasuredKernel&) { return true; });
  EXPECT_LT(held.max_abs, 0.01);
  EXPECT_GT(before.mean_abs, 0.05);  // the preset was not the truth
}

TEST(EfficiencyFit, NoisyTablesGiveEfficienciesInRangeAndAnUnbiasedFit) {
  // Property over random noise: the fitted efficiencies stay in (0, 1], and
  // the fit's mean log error is near zero (it minimises the squared log error).
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 4; ++trial) {
    auto rows = synthetic(truth_gpu(), false);
    std::normal_distribution<double> noise(0, 0.08);
    for (MeasuredKernel& k : rows) *k.time_us *= std::exp(noise(rng));
    const FitReport r = fit_and_validate(scenario::hardware_preset("h100-sxm").gpu(), rows);
    ASSERT_TRUE(r.params.gemm_flops.has_value());
    EXPECT_GT(*r.params.gemm_flops, 0);
    EXPECT_LE(*r.params.gemm_flops, 1);
    for (const auto& [c, v] : r.params.memory) {
      EXPECT_GT(v, 0);
      EXPECT_LE(v, 1);
    }
    double mean_log = 0;
    for (const ScoredRow& s : r.scored) mean_log += std::log(s.fitted_s / s.measured_s);
    EXPECT_NEAR(mean_log / static_cast<double>(r.scored.size()), 0, 0.02);
  }
}

TEST(EfficiencyFit, AMeasuredTimeAboveEveryEfficiencyStaysInRange) {
  // A kernel measured slower than efficiency 0.05 would allow: the fit sits
  // at the range's end, never beyond it.
  auto rows = synthetic(truth_gpu(), false);
  for (MeasuredKernel& k : rows)
    if (k.op_class == ir::RMSNORM) *k.time_us *= 100;
  const FitParams p = fit(scenario::hardware_preset("h100-sxm").gpu(), rows);
  EXPECT_GE(p.memory.at(ir::RMSNORM), 0.05);
  EXPECT_LT(p.memory.at(ir::RMSNORM), 0.06);
}

TEST(EfficiencyFit, ARowFromAnotherGpuIsRefusedByName) {
  auto rows = synthetic(truth_gpu(), false);
  rows[5].gpu = "a100-80gb-sxm";
  rows[5].file = "t.csv";
  rows[5].line = 9;
  try {
    table_preset(rows, "");
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.where().file, "t.csv");
    EXPECT_EQ(e.where().line, 9);
    EXPECT_EQ(e.where().field, "gpu");
  }
  EXPECT_THROW(table_preset(synthetic(truth_gpu(), false), "a100-80gb-sxm"), Error);
  EXPECT_THROW(table_preset(synthetic(truth_gpu(), false), "no-such-gpu"), Error);
}

TEST(EfficiencyFit, ReportListsEveryClassAndTheFragmentReadsAsAPreset) {
  const auto rows = synthetic(truth_gpu(), true);
  const FitReport r = fit_and_validate(scenario::hardware_preset("h100-sxm").gpu(), rows);
  const std::string text = format_report(r, "h100-sxm", {"t.csv"});
  for (const char* s : {"GEMM fwd bf16", "GEMM wgrad bf16", "GEMM fwd fp8", "RMSNORM dgrad bf16", "SWIGLU fwd bf16",
                        "RESIDUAL_ADD fwd bf16", "| all |", "gemm_k_overhead"})
    EXPECT_NE(text.find(s), std::string::npos) << s;
  const std::string csv = report_csv(r);
  EXPECT_EQ(static_cast<size_t>(std::count(csv.begin(), csv.end(), '\n')), rows.size() + 1);
  const std::string svg = report_svg(r, "h100-sxm");
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

}  // namespace
}  // namespace lacuna::kernelfit
