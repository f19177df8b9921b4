// `lacuna efficiency`: end to end through the binary.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/cli_test_util.h"

namespace lacuna {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::read_file;
using testing::run_lacuna;
using testing::TempDir;

TEST(EfficiencyCommand, PrintsTablesComparisonAndWritesSvgAndCsv) {
  TempDir dir("efficiency");
  const auto r = run_lacuna("efficiency --preset a100-80gb-sxm --svg " + (dir / "e.svg") + " --csv " + (dir / "e.csv"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("preset a100-80gb-sxm"));
  EXPECT_THAT(r.output, HasSubstr("GEMM, M = N = K"));
  EXPECT_THAT(r.output, HasSubstr("one transformer layer's forward"));
  EXPECT_THAT(r.output, HasSubstr("Attention, FlashAttention's benchmark"));
  EXPECT_THAT(r.output, HasSubstr("Predicted vs published"));
  EXPECT_THAT(r.output, HasSubstr("GEMM |error|: checks n="));
  EXPECT_THAT(r.output, HasSubstr("ATTENTION |error|: checks n="));
  EXPECT_THAT(r.output, HasSubstr("NVIDIA, CUDA 11 Features Revealed"));
  const std::string svg = read_file(dir / "e.svg");
  EXPECT_THAT(svg, StartsWith("<?xml"));
  EXPECT_THAT(svg, HasSubstr("</svg>"));
  EXPECT_THAT(svg, HasSubstr("published (cuBLAS)"));
  const std::string csv = read_file(dir / "e.csv");
  EXPECT_THAT(csv, StartsWith("section,preset,"));
  EXPECT_THAT(csv, HasSubstr("gemm_square,a100-80gb-sxm,square,8192,8192,8192"));
  EXPECT_THAT(csv, HasSubstr("attention,a100-80gb-sxm,flash"));
  EXPECT_THAT(csv, HasSubstr("published,a100-80gb-sxm"));
}

// The same command twice writes the same bytes (the docs' plot is regenerated).
TEST(EfficiencyCommand, Deterministic) {
  TempDir dir("efficiency-det");
  ASSERT_EQ(run_lacuna("efficiency --svg " + (dir / "a.svg")).exit_code, 0);
  ASSERT_EQ(run_lacuna("efficiency --svg " + (dir / "b.svg")).exit_code, 0);
  EXPECT_EQ(read_file(dir / "a.svg"), read_file(dir / "b.svg"));
}

// The committed plots are what the command writes today.
TEST(EfficiencyCommand, CommittedPlotsAreCurrent) {
  TempDir dir("efficiency-docs");
  for (const std::string preset : {"a100-80gb-sxm", "h100-sxm"}) {
    ASSERT_EQ(run_lacuna("efficiency --preset " + preset + " --svg " + (dir / "p.svg")).exit_code, 0);
    EXPECT_EQ(read_file(dir / "p.svg"), read_file(testing::source_path("docs/efficiency-" + preset + ".svg")))
        << "regenerate with: build/lacuna efficiency --preset " << preset << " --svg docs/efficiency-" << preset
        << ".svg";
  }
}

TEST(EfficiencyCommand, UnknownPresetIsAUserError) {
  const auto r = run_lacuna("efficiency --preset mi300x");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("unknown hardware preset \"mi300x\""));
}

}  // namespace
}  // namespace lacuna
