#include "sim/schedule/schedule.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <tuple>

#include "sim/core/error.h"
#include "sim/proto/scenario.pb.h"

namespace lacuna::schedule {
namespace {

using lacuna::scenario::GPIPE;
using lacuna::scenario::INTERLEAVED_1F1B;
using lacuna::scenario::ONE_F_ONE_B;
using lacuna::scenario::ScheduleKind;
using lacuna::scenario::ZB_H1;

// "F0 F1 B0 ..." with ".c" suffixes for chunks > 0 when interleaved.
std::string render(const std::vector<Action>& actions, bool chunks = false) {
  std::string out;
  for (const Action& a : actions) {
    if (!out.empty()) out += ' ';
    out += to_string(a.pass) + std::to_string(a.microbatch);
    if (chunks) out += "." + std::to_string(a.chunk);
  }
  return out;
}

TEST(Schedule, OneFOneBFollowsMegatronWarmupSteadyCooldown) {
  const auto s = build_schedule(ONE_F_ONE_B, {.pp = 4, .virtual_stages = 1, .microbatches = 8});
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(render(s[0]), "F0 F1 F2 F3 BW0 F4 BW1 F5 BW2 F6 BW3 F7 BW4 BW5 BW6 BW7");
  EXPECT_EQ(render(s[2]), "F0 F1 BW0 F2 BW1 F3 BW2 F4 BW3 F5 BW4 F6 BW5 F7 BW6 BW7");
  EXPECT_EQ(render(s[3]), "F0 BW0 F1 BW1 F2 BW2 F3 BW3 F4 BW4 F5 BW5 F6 BW6 F7 BW7");
}

TEST(Schedule, OneFOneBWithFewerMicrobatchesThanStagesCapsWarmup) {
  const auto s = build_schedule(ONE_F_ONE_B, {.pp = 4, .virtual_stages = 1, .microbatches = 2});
  EXPECT_EQ(render(s[0]), "F0 F1 BW0 BW1");  // warm-up min(3, 2) = 2: no steady state
  EXPECT_EQ(render(s[2]), "F0 F1 BW0 BW1");
  EXPECT_EQ(render(s[3]), "F0 BW0 F1 BW1");
}

TEST(Schedule, GPipeRunsAllForwardsThenBackwardsInMicrobatchOrder) {
  const auto s = build_schedule(GPIPE, {.pp = 2, .virtual_stages = 1, .microbatches = 3});
  EXPECT_EQ(render(s[0]), "F0 F1 F2 BW0 BW1 BW2");
  EXPECT_EQ(render(s[1]), render(s[0]));
}

TEST(Schedule, InterleavedFollowsMegatronChunkGroups) {
  // pp 2, v 2, m 4: rank 0 warm-up (2-0-1)·2 + (2-1)·2 = 4, rank 1 warm-up 2.
  const auto s = build_schedule(INTERLEAVED_1F1B, {.pp = 2, .virtual_stages = 2, .microbatches = 4});
  EXPECT_EQ(render(s[0], true),
            "F0.0 F1.0 F0.1 F1.1 F2.0 BW0.1 F3.0 BW1.1 F2.1 BW0.0 F3.1 BW1.0 BW2.1 BW3.1 BW2.0 BW3.0");
  EXPECT_EQ(render(s[1], true),
            "F0.0 F1.0 F0.1 BW0.1 F1.1 BW1.1 F2.0 BW0.0 F3.0 BW1.0 F2.1 BW2.1 F3.1 BW3.1 BW2.0 BW3.0");
}

TEST(Schedule, InterleavedWarmupIsCappedAtAllPasses) {
  // pp 4, v 3, m 4: rank 0 wants (3)·2 + 2·4 = 14 > 12 warm-up passes → all forwards first.
  const auto s = build_schedule(INTERLEAVED_1F1B, {.pp = 4, .virtual_stages = 3, .microbatches = 4});
  const auto& r0 = s[0];
  ASSERT_EQ(r0.size(), 24u);
  for (size_t i = 0; i < 12; ++i) EXPECT_EQ(r0[i].pass, Pass::kForward) << i;
  for (size_t i = 12; i < 24; ++i) EXPECT_EQ(r0[i].pass, Pass::kBackward) << i;
}

// Optimus's dependency-point deferral: rank r runs clamp(d − 2r, 0,
// 2·(pp − r − 1)) fewer warm-up forwards, so the counts never grow downstream
// and never drop below (v − 1)·pp.
TEST(Schedule, InterleavedDeferralShortensUpstreamWarmups) {
  PipelineShape shape{.pp = 4, .virtual_stages = 2, .microbatches = 8};
  const int megatron[4] = {10, 8, 6, 4};  // (4 − r − 1)·2 + 4
  for (int d = 0; d <= 7; ++d) {
    shape.warmup_deferral = d;
    for (int r = 0; r < 4; ++r) {
      const int expected = megatron[r] - std::clamp(d - 2 * r, 0, megatron[r] - 4);
      EXPECT_EQ(interleaved_warmup(shape, r), expected) << "d " << d << " rank " << r;
      const auto actions = build_schedule(INTERLEAVED_1F1B, shape)[static_cast<size_t>(r)];
      int leading_forwards = 0;
      while (actions[static_cast<size_t>(leading_forwards)].pass == Pass::kForward) ++leading_forwards;
      // The warm-up, then the first steady forward, then the first backward.
      EXPECT_EQ(leading_forwards, expected + 1) << "d " << d << " rank " << r;
    }
  }
  // d = 2 on pp 2, v 2: rank 0 runs 2 warm-up forwards instead of 4, so its
  // chunk-0 forwards of microbatches 2 and 3 come after backwards.
  const auto s = build_schedule(INTERLEAVED_1F1B, {.pp = 2, .virtual_stages = 2, .microbatches = 4, .warmup_deferral = 2});
  EXPECT_EQ(render(s[0], true),
            "F0.0 F1.0 F0.1 BW0.1 F1.1 BW1.1 F2.0 BW0.0 F3.0 BW1.0 F2.1 BW2.1 F3.1 BW3.1 BW2.0 BW3.0");
  EXPECT_THROW(build_schedule(ONE_F_ONE_B, {.pp = 2, .virtual_stages = 1, .microbatches = 4, .warmup_deferral = 1}),
               lacuna::Error);
}

TEST(Schedule, ZbH1DefersWeightGradientsByRank) {
  const auto s = build_schedule(ZB_H1, {.pp = 4, .virtual_stages = 1, .microbatches = 6});
  // Rank 0 (the end of the backward chain) runs W right after B.
  EXPECT_EQ(render(s[0]), "F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 B3 W3 B4 W4 B5 W5");
  // The last rank runs W(i − 3) after B(i): its Bs reach upstream early.
  EXPECT_EQ(render(s[3]), "F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 W3 W4 W5");
}

// ---------------------------------------------------------------- invariants over random shapes

struct Case {
  ScheduleKind kind;
  PipelineShape shape;
};

std::vector<Case> random_cases() {
  std::mt19937 rng(20240117);
  std::vector<Case> cases;
  for (ScheduleKind kind : {GPIPE, ONE_F_ONE_B, INTERLEAVED_1F1B, ZB_H1}) {
    for (int i = 0; i < 40; ++i) {
      PipelineShape s;
      s.pp = std::uniform_int_distribution<int>(kind == INTERLEAVED_1F1B ? 2 : 1, 9)(rng);
      s.virtual_stages = kind == INTERLEAVED_1F1B ? std::uniform_int_distribution<int>(2, 4)(rng) : 1;
      s.microbatches = std::uniform_int_distribution<int>(1, 24)(rng);
      if (kind == INTERLEAVED_1F1B) {
        s.microbatches = s.pp * std::uniform_int_distribution<int>(1, 5)(rng);
        // Half the interleaved cases with Optimus's warm-up deferral.
        if (i % 2 == 1) s.warmup_deferral = std::uniform_int_distribution<int>(0, 2 * s.pp)(rng);
      }
      cases.push_back({kind, s});
    }
  }
  return cases;
}

std::string describe(const Case& c, int rank) {
  return lacuna::scenario::ScheduleKind_Name(c.kind) + " pp=" + std::to_string(c.shape.pp) +
         " v=" + std::to_string(c.shape.virtual_stages) + " m=" + std::to_string(c.shape.microbatches) +
         " d=" + std::to_string(c.shape.warmup_deferral) +
         " rank=" + std::to_string(rank);
}

TEST(ScheduleInvariants, EveryPassOnceAndInDependencyOrder) {
  for (const Case& c : random_cases()) {
    const auto s = build_schedule(c.kind, c.shape);
    ASSERT_EQ(s.size(), static_cast<size_t>(c.shape.pp));
    const bool split = c.kind == ZB_H1;
    for (int r = 0; r < c.shape.pp; ++r) {
      SCOPED_TRACE(describe(c, r));
      std::map<std::tuple<Pass, int, int>, int> position;
      for (size_t i = 0; i < s[r].size(); ++i) {
        const Action& a = s[r][i];
        ASSERT_GE(a.microbatch, 0);
        ASSERT_LT(a.microbatch, c.shape.microbatches);
        ASSERT_GE(a.chunk, 0);
        ASSERT_LT(a.chunk, c.shape.virtual_stages);
        if (split) {
          ASSERT_NE(a.pass, Pass::kBackward);
        } else {
          ASSERT_TRUE(a.pass == Pass::kForward || a.pass == Pass::kBackward);
        }
        ASSERT_TRUE(position.emplace(std::make_tuple(a.pass, a.microbatch, a.chunk), static_cast<int>(i)).second)
            << "duplicate " << to_string(a.pass) << a.microbatch << "." << a.chunk;
      }
      const size_t per_mb = split ? 3 : 2;
      ASSERT_EQ(s[r].size(), per_mb * c.shape.microbatches * c.shape.virtual_stages);
      for (int mb = 0; mb < c.shape.microbatches; ++mb) {
        for (int ch = 0; ch < c.shape.virtual_stages; ++ch) {
          const int f = position.at({Pass::kForward, mb, ch});
          const int b = position.at({split ? Pass::kBackwardInput : Pass::kBackward, mb, ch});
          EXPECT_LT(f, b);
          if (split) {
            EXPECT_LT(b, position.at({Pass::kBackwardWeight, mb, ch}));
          }
        }
      }
    }
  }
}

// Passes whose activations are held at some point of the rank's order: after
// F, until B (or W, when `until_w`).
int peak_in_flight(const std::vector<Action>& actions, bool until_w) {
  int held = 0, peak = 0;
  for (const Action& a : actions) {
    if (a.pass == Pass::kForward) peak = std::max(peak, ++held);
    const bool backward = a.pass == Pass::kBackward || a.pass == Pass::kBackwardInput;
    if (until_w ? a.pass == Pass::kBackwardWeight : backward) --held;
  }
  return peak;
}

TEST(ScheduleInvariants, InFlightActivationsStayWithinTheScheduleBound) {
  for (const Case& c : random_cases()) {
    const auto s = build_schedule(c.kind, c.shape);
    const int p = c.shape.pp, m = c.shape.microbatches, v = c.shape.virtual_stages;
    for (int r = 0; r < p; ++r) {
      SCOPED_TRACE(describe(c, r));
      const int peak = peak_in_flight(s[r], false);
      switch (c.kind) {
        case GPIPE: EXPECT_EQ(peak, m); break;
        case ONE_F_ONE_B: EXPECT_EQ(peak, std::min(p - r, m)); break;
        case INTERLEAVED_1F1B: {
          // Megatron: warm-up forwards plus the steady state's one (the
          // deferral removes up to 2·(pp − r − 1) of the warm-up).
          if (r + 1 < p) EXPECT_GE(interleaved_warmup(c.shape, r), interleaved_warmup(c.shape, r + 1));
          const int slack = (p - r - 1) * 2;
          const int warmup =
              std::min(slack - std::clamp(c.shape.warmup_deferral - 2 * r, 0, slack) + (v - 1) * p, m * v);
          EXPECT_EQ(peak, std::min(warmup + 1, m * v));
          break;
        }
        default:
          EXPECT_EQ(peak, std::min(p - r, m));
          // Weight gradients keep at most pp microbatches (1F1B's rank-0 peak) alive.
          EXPECT_LE(peak_in_flight(s[r], true), std::min(p, m));
          break;
      }
    }
  }
}

// ---------------------------------------------------------------- errors

void expect_error(ScheduleKind kind, PipelineShape shape, const std::string& fragment) {
  try {
    build_schedule(kind, shape);
    ADD_FAILURE() << "no error for " << fragment;
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr(fragment));
  }
}

TEST(ScheduleErrors, InvalidShapesAreRejectedWithAnExplanation) {
  expect_error(ONE_F_ONE_B, {.pp = 0, .virtual_stages = 1, .microbatches = 4}, "pp = 0");
  expect_error(ONE_F_ONE_B, {.pp = 4, .virtual_stages = 1, .microbatches = 0}, "microbatches");
  expect_error(GPIPE, {.pp = 4, .virtual_stages = 0, .microbatches = 4}, "virtual_stages = 0");
  expect_error(ONE_F_ONE_B, {.pp = 4, .virtual_stages = 2, .microbatches = 8}, "virtual_stages = 2");
  expect_error(ZB_H1, {.pp = 4, .virtual_stages = 2, .microbatches = 8}, "INTERLEAVED_1F1B");
  expect_error(INTERLEAVED_1F1B, {.pp = 4, .virtual_stages = 2, .microbatches = 6}, "multiple of pp");
  expect_error(INTERLEAVED_1F1B, {.pp = 4, .virtual_stages = 1, .microbatches = 8}, "at least 2 model chunks");
  expect_error(INTERLEAVED_1F1B, {.pp = 1, .virtual_stages = 2, .microbatches = 8}, "at least 2 pipeline ranks");
  expect_error(lacuna::scenario::SCHEDULE_UNSPECIFIED, {.pp = 2, .virtual_stages = 1, .microbatches = 2},
               "not supported");
}

TEST(ScheduleErrors, ValidShapesAtTheEdgesAreAccepted) {
  EXPECT_EQ(build_schedule(ONE_F_ONE_B, {.pp = 1, .virtual_stages = 1, .microbatches = 1})[0].size(), 2u);
  EXPECT_EQ(build_schedule(ZB_H1, {.pp = 1, .virtual_stages = 1, .microbatches = 3})[0].size(), 9u);
  EXPECT_EQ(build_schedule(INTERLEAVED_1F1B, {.pp = 2, .virtual_stages = 2, .microbatches = 2}).size(), 2u);
}

}  // namespace
}  // namespace lacuna::schedule
