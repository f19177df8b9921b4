#include "sim/schedule/lower_amax.h"

#include <gtest/gtest.h>

#include "sim/core/error.h"
#include "sim/schedule/lower_p2p.h"

namespace lacuna::schedule {
namespace {

ActionSchedule parsed(const std::string& text) { return parse_schedule(text, "amax.txt"); }

// After every F, B and I, ahead of the transfers; none after W or R; a pair's
// after the pair, its forward's first; an R&B's after its B.
TEST(LowerAmax, PlacedAfterEachPassThatReduces) {
  EXPECT_EQ(format_schedule(add_amax_actions(parsed("rank 0: 0F0 0SEND_F0 0I0 0W0 0R1&0B1\n"
                                                    "rank 1: 1F0 1F1&0B0 1B1\n"))),
            "rank 0: 0F0 0AMAX 0SEND_F0 0I0 0AMAX 0W0 0R1&0B1 0AMAX\n"
            "rank 1: 1F0 1AMAX 1F1&0B0 1AMAX 0AMAX 1B1 1AMAX\n");
  // Idempotent: the AMAX actions a file had are dropped first.
  const ActionSchedule once = add_amax_actions(parsed("rank 0: 0F0 0B0\n"));
  EXPECT_EQ(add_amax_actions(once), once);
  EXPECT_TRUE(has_amax_actions(once));
  EXPECT_FALSE(has_amax_actions(parsed("rank 0: 0F0 0B0\n")));
}

// Without AMAX actions every F, B and I reduces when the recipe does; with
// them, exactly the passes they follow.
TEST(LowerAmax, PassesReadBack) {
  const ActionSchedule plain = parsed("rank 0: 0F0 0F1 0I0 0W0 0B1\n");
  EXPECT_EQ(amax_passes_of(plain, 0, true, "a"), (std::vector<bool>{true, true, true, false, true}));
  EXPECT_EQ(amax_passes_of(plain, 0, false, "a"), (std::vector<bool>(5, false)));
  EXPECT_EQ(amax_passes_of(add_amax_actions(plain), 0, true, "a"), (std::vector<bool>{true, true, true, false, true}));
  // Transfers may come between a pass and its AMAX; the first forward's is
  // dropped.
  EXPECT_EQ(amax_passes_of(parsed("rank 0: 0F0 0SEND_F0 0F1 0SEND_F1 0AMAX 0B0 0AMAX 0B1\n"), 0, true, "a"),
            (std::vector<bool>{false, true, true, false}));
  // A pair's two passes, either order of their AMAX.
  const ActionSchedule pair = parsed("rank 0: 0F1&1B0 1AMAX 0AMAX\nrank 1: 1F0\n");
  EXPECT_EQ(amax_passes_of(pair, 0, true, "a"), (std::vector<bool>{true, true}));
  // An R&B: the recompute is part of its backward.
  EXPECT_EQ(amax_passes_of(parsed("rank 0: 0F0 0AMAX 0R0&0B0 0AMAX\n"), 0, true, "a"),
            (std::vector<bool>{true, true}));
}

// The p2p pass keeps AMAX actions (after the pass's calls): with each
// rank's first AMAX removed, the lowered file still reads back without that
// pass's reduction, and lowering in either order gives the same passes.
TEST(LowerAmax, KeptByThePointToPointPass) {
  for (const auto kind : {scenario::ONE_F_ONE_B, scenario::ZB_H1, scenario::GPIPE}) {
    SCOPED_TRACE(scenario::ScheduleKind_Name(kind));
    const PipelineShape shape{.pp = 3, .virtual_stages = 1, .microbatches = 5};
    const ActionSchedule plain = to_actions(build_schedule(kind, shape), shape);
    ActionSchedule placed = add_amax_actions(plain);
    for (RankActions& r : placed) r.erase(r.begin() + 1);  // "sF0 sAMAX ...": the first forward's
    const ActionSchedule lowered = lower_p2p(placed, kind, shape);
    EXPECT_TRUE(has_p2p_actions(lowered));
    for (int32_t r = 0; r < shape.pp; ++r) {
      const std::vector<bool> want = amax_passes_of(placed, r, true, "placed");
      ASSERT_FALSE(want.empty());
      EXPECT_FALSE(want[0]);
      EXPECT_TRUE(want[1] || kind == scenario::ZB_H1);
      EXPECT_EQ(amax_passes_of(lowered, r, true, "lowered"), want);
      EXPECT_EQ(amax_passes_of(add_amax_actions(lower_p2p(plain, kind, shape)), r, true, "b"),
                amax_passes_of(add_amax_actions(plain), r, true, "a"));
    }
  }
}

TEST(LowerAmax, RefusesAnAmaxThatFollowsNoPassOfItsStage) {
  auto problem = [](const std::string& text, bool reduces) -> std::string {
    try {
      amax_passes_of(parsed(text), 0, reduces, "amax.txt");
    } catch (const Error& e) {
      return e.what();
    }
    return "accepted";
  };
  EXPECT_NE(problem("rank 0: 0F0 0AMAX\n", false).find("reduces no amax"), std::string::npos);
  EXPECT_NE(problem("rank 0: 0AMAX 0F0\n", true).find("rank 0, step 0: 0AMAX follows no forward"), std::string::npos);
  EXPECT_NE(problem("rank 0: 0F0 0W0 0AMAX\n", true).find("rank 0, step 2"), std::string::npos);
  EXPECT_NE(problem("rank 0: 0F0 0AMAX 0AMAX\n", true).find("rank 0, step 2"), std::string::npos);
  EXPECT_NE(problem("rank 0: 0F0 0B0 0AMAX 0AMAX\n", true).find("step 3"), std::string::npos);
  EXPECT_NE(problem("rank 0: 0F0 2AMAX\n", true).find("pass of stage 2"), std::string::npos);
  EXPECT_EQ(problem("rank 0: 0F0 0AMAX 0B0\n", true), "accepted");
}

}  // namespace
}  // namespace lacuna::schedule
