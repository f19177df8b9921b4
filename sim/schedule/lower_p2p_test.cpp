#include "sim/schedule/lower_p2p.h"

#include <gtest/gtest.h>

#include "sim/core/error.h"
#include "sim/core/error_testing.h"
#include "sim/proto/scenario.pb.h"
#include "sim/schedule/validate_actions.h"

namespace lacuna::schedule {
namespace {

using lacuna::scenario::ScheduleKind;

using testing_support::formatted_error_of;
std::string error_of(const std::function<void()>& f) { return formatted_error_of(f); }

// The pass and its inverse reproduce Megatron-LM's calls for every built-in
// schedule, rank and a spread of shapes (warm-up longer than the
// microbatches included), through the text form.
TEST(LowerP2p, RoundTripsMegatronsCallsForEveryBuiltInSchedule) {
  struct Case {
    ScheduleKind kind;
    PipelineShape shape;
  };
  std::vector<Case> cases;
  for (int32_t pp : {1, 2, 3, 4, 8})
    for (int32_t m : {1, 2, 3, 8, 16}) {
      for (ScheduleKind k : {lacuna::scenario::GPIPE, lacuna::scenario::ONE_F_ONE_B, lacuna::scenario::ZB_H1})
        cases.push_back({k, {.pp = pp, .virtual_stages = 1, .microbatches = m}});
      if (pp >= 2 && m % pp == 0)
        for (int32_t v : {2, 3})
          cases.push_back({lacuna::scenario::INTERLEAVED_1F1B, {.pp = pp, .virtual_stages = v, .microbatches = m}});
    }
  for (const Case& c : cases) {
    const auto built = build_schedule(c.kind, c.shape);
    const ActionSchedule lowered = lower_p2p(to_actions(built, c.shape), c.kind, c.shape);
    const ActionSchedule reparsed = parse_schedule(format_schedule(lowered), "t");
    ASSERT_EQ(reparsed, lowered);
    EXPECT_NO_THROW(validate_actions(reparsed, c.shape, "t"));
    EXPECT_EQ(to_schedule(reparsed, c.shape, "t"), built);
    for (int32_t r = 0; r < c.shape.pp; ++r)
      EXPECT_EQ(p2p_calls_of(reparsed, r, c.shape, "t"),
                blocking_p2p_calls(c.kind, c.shape, r, built[static_cast<size_t>(r)]))
          << lacuna::scenario::ScheduleKind_Name(c.kind) << " pp " << c.shape.pp << " v " << c.shape.virtual_stages
          << " m " << c.shape.microbatches << " rank " << r;
  }
}

// 1F1B, pp 2, m 2 (p2p_calls.h): rank 0 sends F0's output alone (warm-up),
// batches F1's send with B0's receive (steady), then receives B1's gradient
// alone (cool-down); rank 1 receives F0's input first, then batches B0's
// send with F1's receive, and sends B1's gradient last.
TEST(LowerP2p, OneFOneBClosedForm) {
  const PipelineShape shape{.pp = 2, .virtual_stages = 1, .microbatches = 2};
  const ActionSchedule lowered =
      lower_p2p(to_actions(build_schedule(lacuna::scenario::ONE_F_ONE_B, shape), shape), lacuna::scenario::ONE_F_ONE_B,
                shape);
  EXPECT_EQ(format_schedule(lowered),
            "rank 0: 0F0 0SEND_F0 0F1 0SEND_F1+0RECV_B0 0B0 0RECV_B1 0B1\n"
            "rank 1: 1RECV_F0 1F0 1B0 1SEND_B0+1RECV_F1 1F1 1B1 1SEND_B1\n");
}

std::string calls_error(const std::string& text) {
  const PipelineShape shape{.pp = 2, .virtual_stages = 1, .microbatches = 2};
  return error_of([&] {
    const ActionSchedule s = parse_schedule(text, "s.txt");
    for (int32_t r = 0; r < 2; ++r) p2p_calls_of(s, r, shape, "s.txt");
  });
}

TEST(LowerP2p, WrittenOutTransfersAreCheckedByRankAndStep) {
  const std::string rank1 = "rank 1: 1RECV_F0 1F0 1B0 1SEND_B0+1RECV_F1 1F1 1B1 1SEND_B1\n";
  EXPECT_EQ(calls_error("rank 0: 0F0 0SEND_F0 0F1 0SEND_F1+0RECV_B0 0B0 0RECV_B1 0B1\n" + rank1), "");
  // B1's gradient never received.
  EXPECT_NE(calls_error("rank 0: 0F0 0SEND_F0 0F1 0SEND_F1+0RECV_B0 0B0 0B1\n" + rank1)
                .find("rank 0, step 6: 0B1 has no 0RECV_B1 before it"),
            std::string::npos);
  // A send before its pass.
  EXPECT_NE(calls_error("rank 0: 0SEND_F0 0F0 0F1 0SEND_F1+0RECV_B0 0B0 0RECV_B1 0B1\n" + rank1)
                .find("rank 0, step 0: 0SEND_F0 sends the output of a pass that has not run yet (step 1)"),
            std::string::npos);
  // Stage 0 receives no activation.
  EXPECT_NE(calls_error("rank 0: 0RECV_F0 0F0 0SEND_F0 0F1 0SEND_F1+0RECV_B0 0B0 0RECV_B1 0B1\n" + rank1)
                .find("0RECV_F0: stage 0 receives nothing before its forward"),
            std::string::npos);
  // A receive after its pass.
  EXPECT_NE(calls_error("rank 0: 0F0 0SEND_F0 0F1 0SEND_F1 0B0 0RECV_B0 0RECV_B1 0B1\n" + rank1)
                .find("rank 0, step 5: 0RECV_B0 receives the input of a pass that already ran (step 4)"),
            std::string::npos);
  // Twice.
  EXPECT_NE(calls_error("rank 0: 0F0 0SEND_F0 0SEND_F0 0F1 0SEND_F1+0RECV_B0 0B0 0RECV_B1 0B1\n" + rank1)
                .find("0SEND_F0 is listed twice"),
            std::string::npos);
  // '+' joins transfers only.
  EXPECT_NE(error_of([] { parse_schedule("rank 0: 0F0+0SEND_F0\n", "s.txt"); })
                .find("only sends and receives join into one call"),
            std::string::npos);
}

}  // namespace
}  // namespace lacuna::schedule
