// training.fp8's rules (docs/fp8.md#validation): message, field and line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/scenario/test_support.h"

namespace lacuna::scenario {
namespace {

using ::testing::HasSubstr;
using testing::error_of;
using testing::line_of;
using testing::read_source;
using testing::replace_once;

const std::string kSmall = "scenarios/llm/gpt-1.3b-8gpu.pbtxt";  // h100-sxm, BF16, distributed optimizer

std::string with_training(const std::string& precision_and_fp8) {
  return replace_once(read_source(kSmall), "  precision: BF16\n", precision_and_fp8);
}

void expect_error(const std::string& text, const std::string& field, const std::string& message,
                  const std::string& located) {
  const Error e = error_of(text, Format::kText, kSmall);
  EXPECT_THAT(e.problem(), HasSubstr(message)) << e.what();
  EXPECT_EQ(e.where().field, field) << e.what();
  EXPECT_EQ(e.where().file, kSmall);
  EXPECT_EQ(e.where().line, line_of(text, located)) << e.what();
  EXPECT_FALSE(e.fix().empty());
}

TEST(Fp8Validation, SettingsWithoutFp8PrecisionAreRefused) {
  const std::string text = with_training("  precision: BF16\n  fp8 { recipe: FP8_CURRENT }\n");
  expect_error(text, "training.fp8", "training.precision is BF16", "fp8 {");
}

TEST(Fp8Validation, Mxfp8NeedsMxTensorCores) {
  const std::string text = with_training("  precision: FP8\n  fp8 { recipe: FP8_MXFP8 }\n");
  expect_error(text, "training.fp8.recipe", "FP8_MXFP8 needs tensor cores with OCP MX formats", "recipe: FP8_MXFP8");
  // With MX formats declared on the GPU it is accepted.
  const std::string ok = replace_once(text, "preset: \"h100-sxm\"", "preset: \"h100-sxm\"\n  gpu { mx_formats: true }");
  EXPECT_NO_THROW(parse_scenario(ok, Format::kText, kSmall));
}

TEST(Fp8Validation, AmaxHistoryOnlyForDelayedScaling) {
  expect_error(with_training("  precision: FP8\n  fp8 { recipe: FP8_CURRENT amax_history_len: 16 }\n"),
               "training.fp8.amax_history_len", "only delayed scaling keeps an amax history", "amax_history_len: 16");
  expect_error(with_training("  precision: FP8\n  fp8 { amax_history_len: 0 }\n"), "training.fp8.amax_history_len",
               "must be in [1, 1000000]", "amax_history_len: 0");
  EXPECT_NO_THROW(parse_scenario(with_training("  precision: FP8\n  fp8 { amax_history_len: 1024 }\n"), Format::kText,
                                 kSmall));
}

TEST(Fp8Validation, TpOnlyAmaxReductionOnlyForDelayedScaling) {
  expect_error(with_training("  precision: FP8\n  fp8 { recipe: FP8_BLOCKWISE tp_only_amax_reduction: true }\n"),
               "training.fp8.tp_only_amax_reduction", "only delayed scaling reduces amaxes",
               "tp_only_amax_reduction: true");
  EXPECT_NO_THROW(parse_scenario(with_training("  precision: FP8\n  fp8 { tp_only_amax_reduction: true }\n"),
                                 Format::kText, kSmall));
}

TEST(Fp8Validation, ParamGatherNeedsTheDistributedOptimizer) {
  std::string text = with_training("  precision: FP8\n  fp8 { param_gather: true }\n");
  text = replace_once(text, "distributed_optimizer: true", "distributed_optimizer: false");
  expect_error(text, "training.fp8.param_gather", "needs the distributed optimizer", "param_gather: true");
}

TEST(Fp8Validation, Fp8OnAGpuWithoutFp8NamesThePrecision) {
  std::string text = with_training("  precision: FP8\n");
  text = replace_once(text, "preset: \"h100-sxm\"", "preset: \"a100-80gb-sxm\"");
  expect_error(text, "training.precision", "precision FP8 is not supported", "precision: FP8");
}

}  // namespace
}  // namespace lacuna::scenario
