// End-to-end: `lacuna validate --only nccl` (docs/validation.md §3): every
// collective micro-scenario within ±10 % of its published nccl-tests figure
// (a published range counts as exact inside it), on the default (flow-level)
// network model and on the analytic one.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/cli_test_util.h"

namespace lacuna::testing {
namespace {

void expect_nccl_rows_within_10_percent(const std::string& network_flag) {
  TempDir dir("validate");
  const auto r = run_lacuna("validate --only nccl " + network_flag + " --json " + (dir / "v.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("8×A100 SXM"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Mean absolute error"), std::string::npos) << r.output;
  const auto j = nlohmann::json::parse(read_file(dir / "v.json"));
  ASSERT_TRUE(j["tables"].contains("nccl")) << j.dump(2);
  EXPECT_FALSE(j["tables"].contains("ptdp"));
  const auto& rows = j["tables"]["nccl"]["rows"];
  ASSERT_EQ(rows.size(), 6u);
  for (const auto& row : rows) {
    const double predicted = row["predicted"].get<double>();
    const double lo = row["published_low"].get<double>(), hi = row["published_high"].get<double>();
    EXPECT_GT(predicted, 0.9 * lo) << row["name"] << ": " << predicted << " GB/s vs published " << row["published"];
    EXPECT_LT(predicted, 1.1 * hi) << row["name"] << ": " << predicted << " GB/s vs published " << row["published"];
    EXPECT_LE(std::abs(row["error"].get<double>()), 0.10) << row["name"];
  }
}

TEST(ValidateE2E, NcclRowsWithinTenPercentFlow) { expect_nccl_rows_within_10_percent(""); }
TEST(ValidateE2E, NcclRowsWithinTenPercentAnalytic) { expect_nccl_rows_within_10_percent("--network analytic"); }

TEST(ValidateE2E, OutputIsDeterministic) {
  const auto a = run_lacuna("validate --only nccl");
  const auto b = run_lacuna("validate --only nccl");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_EQ(a.output, b.output);
}

TEST(ValidateE2E, RejectsUnknownTable) {
  const auto r = run_lacuna("validate --only nope");
  EXPECT_EQ(r.exit_code, 2) << r.output;
}

}  // namespace
}  // namespace lacuna::testing
