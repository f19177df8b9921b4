#include "sim/schedule/lower_recompute.h"

#include <gtest/gtest.h>

#include <string>

#include "sim/core/error.h"
#include "sim/core/error_testing.h"
#include "sim/proto/scenario.pb.h"
#include "sim/schedule/dualpipev.h"
#include "sim/schedule/lower_dp.h"
#include "sim/schedule/lower_p2p.h"
#include "sim/schedule/p2p_calls.h"
#include "sim/schedule/synthetic_test_support.h"
#include "sim/schedule/validate_actions.h"

namespace lacuna::schedule {
namespace {

using lacuna::scenario::ScheduleKind;
using testing_support::formatted_error_of;

ActionSchedule built(ScheduleKind kind, const PipelineShape& shape) {
  return to_actions(build_schedule(kind, shape), shape);
}

ActionSchedule parsed(const std::string& text) { return parse_schedule(text, "sched.txt"); }

// 1F1B, pp 2, m 2: every backward gets its recompute, interleaved with it.
TEST(LowerRecompute, OneFOneBClosedForm) {
  const PipelineShape shape{.pp = 2, .virtual_stages = 1, .microbatches = 2};
  const ActionSchedule s = add_recompute_actions(built(lacuna::scenario::ONE_F_ONE_B, shape));
  EXPECT_EQ(format_schedule(s),
            "rank 0: 0F0 0F1 0R0&0B0 0R1&0B1\n"
            "rank 1: 1F0 1R0&1B0 1F1 1R1&1B1\n");
  // The zero-bubble split recomputes for the input gradient.
  EXPECT_EQ(format_schedule(add_recompute_actions(built(lacuna::scenario::ZB_H1, shape))),
            "rank 0: 0F0 0F1 0R0&0I0 0W0 0R1&0I1 0W1\n"
            "rank 1: 1F0 1R0&1I0 1F1 1R1&1I1 1W0 1W1\n");
}

// For every built-in schedule: the pass round-trips through the text form,
// validates, is idempotent, and "R&B" is the backward alone to the builder,
// so the compiled passes are those of the schedule without it.
TEST(LowerRecompute, BuiltInSchedulesKeepTheirPasses) {
  for (const ScheduleKind kind : {lacuna::scenario::GPIPE, lacuna::scenario::ONE_F_ONE_B,
                                  lacuna::scenario::INTERLEAVED_1F1B, lacuna::scenario::ZB_H1})
    for (const auto& [pp, m] : {std::pair{2, 4}, {4, 8}, {3, 6}}) {
      SCOPED_TRACE(lacuna::scenario::ScheduleKind_Name(kind) + " pp " + std::to_string(pp));
      const PipelineShape shape{.pp = pp, .virtual_stages = kind == lacuna::scenario::INTERLEAVED_1F1B ? 2 : 1,
                                .microbatches = m};
      const ActionSchedule plain = built(kind, shape);
      const ActionSchedule with = add_recompute_actions(plain);
      EXPECT_TRUE(has_recompute_actions(with));
      EXPECT_FALSE(has_recompute_actions(plain));
      EXPECT_EQ(parsed(format_schedule(with)), with);
      EXPECT_EQ(parsed(format_csv(with)), with);
      EXPECT_NO_THROW(validate_actions(with, shape, "sched.txt"));
      EXPECT_EQ(add_recompute_actions(with), with);
      EXPECT_EQ(to_schedule(with, shape, "sched.txt"), to_schedule(plain, shape, "sched.txt"));
      EXPECT_EQ(overlapped_pairs(with), overlapped_pairs(plain));
      // The p2p and DP passes keep every pair whole, and commute with it.
      const ActionSchedule lowered = lower_p2p(with, kind, shape);
      EXPECT_EQ(lowered, add_recompute_actions(lower_p2p(plain, kind, shape)));
      const DpSettings dp{.reduce = true, .unshard = true, .overlap_reduce = true};
      EXPECT_EQ(add_dp_actions(with, shape, dp), add_recompute_actions(add_dp_actions(plain, shape, dp)));
      for (const RankActions& rank : lowered)
        for (size_t k = 0; k < rank.size(); ++k)
          if (rank[k]->type == ActionType::kRecompute) {
            ASSERT_LT(k + 1, rank.size());
            EXPECT_TRUE(rank[k]->overlaps_next);
            EXPECT_EQ(rank[k + 1]->stage, rank[k]->stage);
            EXPECT_EQ(rank[k + 1]->microbatch, rank[k]->microbatch);
          }
    }
}

// A lone R stays where the file put it, and no second one is added; it is a
// pass of its own to the builder.
TEST(LowerRecompute, ALoneRecomputeIsAPassOfItsOwn) {
  const PipelineShape shape{.pp = 2, .virtual_stages = 1, .microbatches = 2};
  const ActionSchedule s = parsed("rank 0: 0F0 0F1 0R0 0R1 0B0 0B1\nrank 1: 1F0 1F1 1B0 1B1\n");
  EXPECT_NO_THROW(validate_actions(s, shape, "sched.txt"));
  EXPECT_EQ(format_schedule(add_recompute_actions(s)),
            "rank 0: 0F0 0F1 0R0 0R1 0B0 0B1\n"
            "rank 1: 1F0 1F1 1R0&1B0 1R1&1B1\n");
  const auto passes = to_schedule(s, shape, "sched.txt");
  EXPECT_EQ(passes[0], (std::vector<Action>{{Pass::kForward, 0, 0},
                                            {Pass::kForward, 1, 0},
                                            {Pass::kRecompute, 0, 0},
                                            {Pass::kRecompute, 1, 0},
                                            {Pass::kBackward, 0, 0},
                                            {Pass::kBackward, 1, 0}}));
  // No transfer runs for a recompute: the generic rule's calls are those of
  // the order without it, after the same passes.
  const std::vector<P2pCall> calls = blocking_p2p_calls(lacuna::scenario::CUSTOM, shape, 0, passes[0]);
  for (const P2pCall& call : calls) {
    for (const int32_t i : call.sends) EXPECT_NE(passes[0][static_cast<size_t>(i)].pass, Pass::kRecompute);
    for (const int32_t i : call.recvs) EXPECT_NE(passes[0][static_cast<size_t>(i)].pass, Pass::kRecompute);
  }
}

// Under blocking calls a lone R joins the pass before it: that pass's send
// and the next pass's receive stay one batched call, issued after the R, so
// the recompute runs before the rank waits for the gradient.
TEST(LowerRecompute, BlockingCallsComeAfterALoneRecompute) {
  const PipelineShape shape{.pp = 2, .virtual_stages = 1, .microbatches = 2};
  const ActionSchedule s = parsed("rank 0: 0F0 0F1 0R0 0B0 0R1 0B1\nrank 1: 1F0 1B0 1F1 1B1\n");
  const auto passes = to_schedule(s, shape, "sched.txt");
  // Passes 0F0 0F1 0R0 0B0 0R1 0B1: 0F0's send alone; 0F1's send with 0B0's
  // receive after 0R0; 0B1's receive after 0R1.
  EXPECT_EQ(blocking_p2p_calls(lacuna::scenario::CUSTOM, shape, 0, passes[0]),
            (std::vector<P2pCall>{{0, {0}, {}}, {2, {1}, {3}}, {4, {}, {5}}}));
  // Without the R the calls are the same, after the forward.
  const auto plain = to_schedule(parsed("rank 0: 0F0 0F1 0B0 0B1\nrank 1: 1F0 1B0 1F1 1B1\n"), shape, "sched.txt");
  EXPECT_EQ(blocking_p2p_calls(lacuna::scenario::CUSTOM, shape, 0, plain[0]),
            (std::vector<P2pCall>{{0, {0}, {}}, {1, {1}, {2}}, {2, {}, {3}}}));
}

// DualPipe's "F&B" pairs stay pairs: their backward keeps its recompute
// inside, unwritten.
TEST(LowerRecompute, DualPipePairsStayWhole) {
  const ActionSchedule plain = dualpipev_schedule(4, 8);
  const ActionSchedule with = add_recompute_actions(plain);
  EXPECT_EQ(overlapped_pairs(with), overlapped_pairs(plain));
  for (const RankActions& rank : with)
    for (size_t k = 0; k + 1 < rank.size(); ++k)
      if (rank[k] && rank[k]->overlaps_next && rank[k]->type == ActionType::kForward)
        EXPECT_NE(rank[k + 1]->type, ActionType::kRecompute);
}

TEST(LowerRecompute, RefusedWithoutFullRecompute) {
  const ActionSchedule s = parsed("rank 0: 0F0 0F1 0R0&0B0 0B1\nrank 1: 1F0 1B0 1F1 1B1\n");
  EXPECT_NO_THROW(check_recompute_actions(s, "RECOMPUTE_FULL", "sched.txt"));
  const std::string none = formatted_error_of([&] { check_recompute_actions(s, "RECOMPUTE_NONE", "sched.txt"); });
  EXPECT_NE(none.find("rank 0, step 2: 0R0 recomputes whole layers, but the scenario's parallel.recompute is "
                      "RECOMPUTE_NONE (nothing is recomputed)"),
            std::string::npos)
      << none;
  EXPECT_NE(none.find("set parallel.recompute: RECOMPUTE_FULL, or drop the R actions"), std::string::npos) << none;
  const std::string selective =
      formatted_error_of([&] { check_recompute_actions(s, "RECOMPUTE_SELECTIVE", "sched.txt"); });
  EXPECT_NE(selective.find("the attention core, recomputed inside each backward"), std::string::npos) << selective;
  // A schedule without R passes whatever the setting.
  EXPECT_NO_THROW(check_recompute_actions(parsed("rank 0: 0F0 0B0\n"), "RECOMPUTE_NONE", "sched.txt"));
}

TEST(LowerRecompute, TheTextFormPairsARecomputeWithItsOwnBackwardOnly) {
  const ActionSchedule ok = parsed("rank 0: 3R1&3B1 vit:0R2&vit:0I2\n");
  EXPECT_TRUE(ok[0][0]->overlaps_next);
  EXPECT_EQ(ok[0][1]->type, ActionType::kBackward);
  EXPECT_EQ(ok[0][3]->type, ActionType::kBackwardInput);
  for (const char* bad : {"rank 0: 3R1&3B2\n", "rank 0: 3R1&4B1\n", "rank 0: vit:3R1&3B1\n"}) {
    const std::string e = formatted_error_of([&] { parsed(bad); });
    EXPECT_NE(e.find("a recompute interleaves with its own backward only"), std::string::npos) << bad << e;
  }
  EXPECT_NE(formatted_error_of([&] { parsed("rank 0: 3R1&3F1\n"); }).find("ends with a backward"), std::string::npos);
  EXPECT_NE(formatted_error_of([&] { parsed("rank 0: 3W1&3B1\n"); }).find("starts with a forward (F&B) or a recompute"),
            std::string::npos);
}

TEST(LowerRecompute, ValidationPlacesTheRecomputeBetweenItsForwardAndItsBackward) {
  const PipelineShape shape{.pp = 1, .virtual_stages = 1, .microbatches = 2};
  auto error = [&](const std::string& text) {
    return formatted_error_of([&] { validate_actions(parsed(text), shape, "sched.txt"); });
  };
  EXPECT_EQ(error("rank 0: 0F0 0R0 0F1 0B0 0R1&0B1\n"), "");
  EXPECT_NE(error("rank 0: 0R0 0F0 0F1 0B0 0B1\n").find("rank 0, step 0: 0R0 recomputes a forward that has not run"),
            std::string::npos);
  EXPECT_NE(error("rank 0: 0F0 0F1 0B0 0R0 0B1\n").find("rank 0, step 3: 0R0 comes after its backward 0B0 (step 2)"),
            std::string::npos);
  EXPECT_NE(error("rank 0: 0F0 0R0 0F1 0R0 0B0 0B1\n").find("0R0 runs twice (first at step 1)"), std::string::npos);
  EXPECT_NE(error("rank 0: 0F0 0F1 0I0 0R0 0W0 0B1\n").find("0R0 comes after its backward 0I0 (step 2)"),
            std::string::npos);
}

// GPipe, free transfers, F = f, B + W = b, a recompute costs a forward.
// Recomputed inside each backward (R&B: a backward of b + f) the iteration is
// (m + p − 1)·(2f + b). Each R run as a pass of its own right before its
// backward runs while the rank waits for the gradient: only the last rank's
// recomputes stay on the critical path, (m + p − 1)·f + m·(f + b) + (p − 1)·b,
// (p − 1)·f shorter (Mario's point, PPoPP 2025).
TEST(LowerRecompute, ALoneRecomputeFillsTheCooldownBubbleClosedForm) {
  using synthetic_support::synthetic_end_ns;
  const int64_t f = 120, b = 240;
  for (const auto& [p, m] : {std::pair{2, 2}, {4, 4}, {4, 8}, {8, 16}, {3, 5}}) {
    SCOPED_TRACE("p " + std::to_string(p) + " m " + std::to_string(m));
    SyntheticPipeline interleaved;
    interleaved.kind = lacuna::scenario::GPIPE;
    interleaved.shape = {.pp = p, .virtual_stages = 1, .microbatches = m};
    interleaved.per_stage = {{TimeNs(f), TimeNs(b - 110 + f), TimeNs(110)}};
    EXPECT_EQ(synthetic_end_ns(interleaved), (m + p - 1) * (2 * f + b));

    SyntheticPipeline ahead = interleaved;
    ahead.per_stage = {{TimeNs(f), TimeNs(b - 110), TimeNs(110)}};
    ActionSchedule text = built(lacuna::scenario::GPIPE, ahead.shape);
    for (RankActions& rank : text)
      for (size_t k = 0; k < rank.size(); ++k)
        if (rank[k]->type == ActionType::kBackward) {
          ScheduleAction r = *rank[k];
          r.type = ActionType::kRecompute;
          rank.insert(rank.begin() + static_cast<std::ptrdiff_t>(k), r);
          ++k;
        }
    ASSERT_NO_THROW(validate_actions(text, ahead.shape, "sched.txt"));
    ahead.order = to_schedule(text, ahead.shape, "sched.txt");
    EXPECT_EQ(synthetic_end_ns(ahead), (m + p - 1) * f + m * (f + b) + (p - 1) * b);
  }
}

}  // namespace
}  // namespace lacuna::schedule
