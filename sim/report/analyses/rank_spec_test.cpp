#include "sim/report/analyses/rank_spec.h"

#include <gtest/gtest.h>

#include "sim/core/error.h"
#include "sim/core/error_testing.h"

namespace lacuna::report {
namespace {

// 8 ranks: tp 2 (fastest), pp 2, dp 2 → rank = tp + 2·dp + 4·pp.
ir::Program grid() {
  ir::Program p;
  p.mutable_info()->set_pp(2);
  for (int r = 0; r < 8; ++r) {
    ir::RankBinding* b = p.add_ranks();
    b->mutable_coord()->set_tp(r % 2);
    b->mutable_coord()->set_dp((r / 2) % 2);
    b->mutable_coord()->set_pp(r / 4);
  }
  return p;
}

TEST(RankSpec, PipelineIsTheTpCpDpZeroRankOfEachStage) {
  EXPECT_EQ(select_ranks(parse_rank_spec("pipeline"), grid()), (std::vector<int32_t>{0, 4}));
}

TEST(RankSpec, AllStageAndLists) {
  EXPECT_EQ(select_ranks(parse_rank_spec("all"), grid()).size(), 8u);
  EXPECT_EQ(select_ranks(parse_rank_spec("stage:1"), grid()), (std::vector<int32_t>{4, 5, 6, 7}));
  EXPECT_EQ(select_ranks(parse_rank_spec("5,0-2,1"), grid()), (std::vector<int32_t>{0, 1, 2, 5}));
  EXPECT_EQ(select_ranks(parse_rank_spec("7"), grid()), (std::vector<int32_t>{7}));
}

TEST(RankSpec, MalformedSpecsAreUserErrors) {
  for (const char* bad : {"", "pipelines", "1-", "-3", "3-1", "a,b", "1,,2", "stage:", "stage:x", "1 2", "0-2-4"}) {
    EXPECT_THROW(parse_rank_spec(bad), Error) << bad;
  }
}

// Errors name the selection as the caller spells it (the CLI's
// --trace-ranks, execute's --ranks), and the library names no flag itself.
TEST(RankSpec, ErrorsNameTheCallersOption) {
  using testing_support::formatted_error_of;
  EXPECT_EQ(formatted_error_of([] { parse_rank_spec("3-1", "--trace-ranks"); }).rfind("--trace-ranks: \"3-1\"", 0), 0u);
  EXPECT_EQ(formatted_error_of([] { parse_rank_spec("3-1"); }).rfind("ranks: \"3-1\"", 0), 0u);
  EXPECT_EQ(formatted_error_of([] { select_ranks(parse_rank_spec("9", "--ranks"), grid()); }).rfind("--ranks: ", 0),
            0u);
}

TEST(RankSpec, SelectionsOutsideTheProgramAreUserErrors) {
  EXPECT_THROW(select_ranks(parse_rank_spec("0-8"), grid()), Error);
  EXPECT_THROW(select_ranks(parse_rank_spec("stage:2"), grid()), Error);
  try {
    select_ranks(parse_rank_spec("9"), grid());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("out of range (program has 8 ranks)"), std::string::npos) << e.what();
  }
}

TEST(RankSpec, FoldModeMapsToRepresentatives) {
  const ir::Program p = grid();
  engine::RunInfo info;
  info.program = &p;
  info.simulated_ranks = {0, 4};
  info.represents = {{0, 1, 2, 3}, {4, 5, 6, 7}};
  EXPECT_EQ(select_simulated_ranks(parse_rank_spec("all"), p, info), (std::vector<int32_t>{0, 4}));
  EXPECT_EQ(select_simulated_ranks(parse_rank_spec("5-6"), p, info), (std::vector<int32_t>{4}));
}

}  // namespace
}  // namespace lacuna::report
