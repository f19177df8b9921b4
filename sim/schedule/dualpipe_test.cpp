// DualPipe (sim/schedule/dualpipe.h) against its authors' runtime: the
// orders below were recorded by running DualPipe.step of deepseek-ai/DualPipe's
// dualpipe/dualpipe.py (commit 3da1bbea), unmodified, with torch stubbed out
// and the compute methods overridden to log each pass
// (tools/reference/dualpipe_orders.py dualpipe; docs/schedules.md#dualpipe). Then the
// bidirectional layout's checks and the engine: DualPipe on pp ranks runs as
// long as DualPipeV on pp/2, the cut-in-half that derives one from the other.
#include "sim/schedule/dualpipe.h"

#include <gtest/gtest.h>

#include "sim/core/error.h"
#include "sim/schedule/dualpipev.h"
#include "sim/schedule/synthetic_test_support.h"
#include "sim/schedule/validate_actions.h"

namespace lacuna::schedule {
namespace {

struct Case {
  int32_t pp, microbatches;
  const char* expected;
};

const Case kCases[] = {
    {2, 4,
     "rank 0: 0F0 3F2 0F1 3B2 3F3&0B0 3B3 0I1 0W1\n"
     "rank 1: 2F2 1F0 2F3 1B0 1F1&2B2 1B1 2I3 2W3\n"},
    {4, 8,
     "rank 0: 0F0 0F1 0F2 7F4 7I4 7W4 7F5 0F3&7B5 7F6&0B0 7B6 7F7&0B1 7B7 0I2 0W2 0I3 0W3\n"
     "rank 1: 1F0 6F4 1F1 6F5 1F2 6B4 6F6&1B0 1F3&6B5 6F7&1B1 6B6 1B2 6I7 1I3 6W7 1W3\n"
     "rank 2: 5F4 2F0 5F5 2F1 5F6 2B0 2F2&5B4 5F7&2B1 2F3&5B5 2B2 5B6 2I3 5I7 2W3 5W7\n"
     "rank 3: 4F4 4F5 4F6 3F0 3I0 3W0 3F1 4F7&3B1 3F2&4B4 3B2 3F3&4B5 3B3 4I6 4W6 4I7 4W7\n"},
    {4, 10,
     "rank 0: 0F0 0F1 0F2 7F5 7I5 7W5 7F6 0F3&7B6 7F7&0B0 0F4&7B7 7F8&0B1 7B8 7F9&0B2 7B9 0I3 0W3 0I4 "
     "0W4\n"
     "rank 1: 1F0 6F5 1F1 6F6 1F2 6B5 6F7&1B0 1F3&6B6 6F8&1B1 1F4&6B7 6F9&1B2 6B8 1B3 6I9 1I4 6W9 1W4\n"
     "rank 2: 5F5 2F0 5F6 2F1 5F7 2B0 2F2&5B5 5F8&2B1 2F3&5B6 5F9&2B2 2F4&5B7 2B3 5B8 2I4 5I9 2W4 5W9\n"
     "rank 3: 4F5 4F6 4F7 3F0 3I0 3W0 3F1 4F8&3B1 3F2&4B5 4F9&3B2 3F3&4B6 3B3 3F4&4B7 3B4 4I8 4W8 4I9 "
     "4W9\n"},
    {6, 12,
     "rank 0: 0F0 0F1 0F2 0F3 0F4 11F6 11I6 11W6 11F7 11I7 11W7 11F8 0F5&11B8 11F9&0B0 11B9 11F10&0B1 "
     "11B10 11F11&0B2 11B11 0I3 0W3 0I4 0W4 0I5 0W5\n"
     "rank 1: 1F0 1F1 1F2 10F6 1F3 10F7 10I6 10W6 10F8 1F4&10B7 10F9&1B0 1F5&10B8 10F10&1B1 10B9 10F11&1B2 "
     "10B10 1B3 10I11 1I4 10W11 1I5 1W4 1W5\n"
     "rank 2: 2F0 9F6 2F1 9F7 2F2 9F8 2F3 9B6 9F9&2B0 2F4&9B7 9F10&2B1 2F5&9B8 9F11&2B2 9B9 2B3 9B10 2I4 "
     "9I11 2I5 2W4 9W11 2W5\n"
     "rank 3: 8F6 3F0 8F7 3F1 8F8 3F2 8F9 3B0 3F3&8B6 8F10&3B1 3F4&8B7 8F11&3B2 3F5&8B8 3B3 8B9 3B4 8I10 "
     "3I5 8I11 8W10 3W5 8W11\n"
     "rank 4: 7F6 7F7 7F8 4F0 7F9 4F1 4I0 4W0 4F2 7F10&4B1 4F3&7B6 7F11&4B2 4F4&7B7 4B3 4F5&7B8 4B4 7B9 "
     "4I5 7I10 4W5 7I11 7W10 7W11\n"
     "rank 5: 6F6 6F7 6F8 6F9 6F10 5F0 5I0 5W0 5F1 5I1 5W1 5F2 6F11&5B2 5F3&6B6 5B3 5F4&6B7 5B4 5F5&6B8 "
     "5B5 6I9 6W9 6I10 6W10 6I11 6W11\n"},
    // The authors' README figure: 8 ranks, 20 microbatches.
    {8, 20,
     "rank 0: 0F0 0F1 0F2 0F3 0F4 0F5 0F6 15F10 15I10 15W10 15F11 15I11 15W11 15F12 15I12 15W12 15F13 "
     "0F7&15B13 15F14&0B0 0F8&15B14 15F15&0B1 0F9&15B15 15F16&0B2 15B16 15F17&0B3 15B17 15F18&0B4 15B18 "
     "15F19&0B5 15B19 0I6 0W6 0I7 0W7 0I8 0W8 0I9 0W9\n"
     "rank 1: 1F0 1F1 1F2 1F3 1F4 14F10 1F5 14F11 14I10 14W10 14F12 14I11 14W11 14F13 1F6&14B12 14F14&1B0 "
     "1F7&14B13 14F15&1B1 1F8&14B14 14F16&1B2 1F9&14B15 14F17&1B3 14B16 14F18&1B4 14B17 14F19&1B5 14B18 "
     "1B6 14I19 1I7 14W19 1I8 1W7 1I9 1W8 1W9\n"
     "rank 2: 2F0 2F1 2F2 13F10 2F3 13F11 2F4 13F12 13I10 13W10 13F13 2F5&13B11 13F14&2B0 2F6&13B12 "
     "13F15&2B1 2F7&13B13 13F16&2B2 2F8&13B14 13F17&2B3 2F9&13B15 13F18&2B4 13B16 13F19&2B5 13B17 2B6 "
     "13B18 2I7 13I19 2I8 2W7 2I9 13W19 2W8 2W9\n"
     "rank 3: 3F0 12F10 3F1 12F11 3F2 12F12 3F3 12F13 3F4 12B10 12F14&3B0 3F5&12B11 12F15&3B1 3F6&12B12 "
     "12F16&3B2 3F7&12B13 12F17&3B3 3F8&12B14 12F18&3B4 3F9&12B15 12F19&3B5 12B16 3B6 12B17 3B7 12I18 3I8 "
     "12I19 3I9 12W18 3W8 12W19 3W9\n"
     "rank 4: 11F10 4F0 11F11 4F1 11F12 4F2 11F13 4F3 11F14 4B0 4F4&11B10 11F15&4B1 4F5&11B11 11F16&4B2 "
     "4F6&11B12 11F17&4B3 4F7&11B13 11F18&4B4 4F8&11B14 11F19&4B5 4F9&11B15 4B6 11B16 4B7 11B17 4I8 11I18 "
     "4I9 11I19 4W8 11W18 4W9 11W19\n"
     "rank 5: 10F10 10F11 10F12 5F0 10F13 5F1 10F14 5F2 5I0 5W0 5F3 10F15&5B1 5F4&10B10 10F16&5B2 "
     "5F5&10B11 10F17&5B3 5F6&10B12 10F18&5B4 5F7&10B13 10F19&5B5 5F8&10B14 5B6 5F9&10B15 5B7 10B16 5B8 "
     "10I17 5I9 10I18 10W17 10I19 5W9 10W18 10W19\n"
     "rank 6: 9F10 9F11 9F12 9F13 9F14 6F0 9F15 6F1 6I0 6W0 6F2 6I1 6W1 6F3 9F16&6B2 6F4&9B10 9F17&6B3 "
     "6F5&9B11 9F18&6B4 6F6&9B12 9F19&6B5 6F7&9B13 6B6 6F8&9B14 6B7 6F9&9B15 6B8 9B16 6I9 9I17 6W9 9I18 "
     "9W17 9I19 9W18 9W19\n"
     "rank 7: 8F10 8F11 8F12 8F13 8F14 8F15 8F16 7F0 7I0 7W0 7F1 7I1 7W1 7F2 7I2 7W2 7F3 8F17&7B3 7F4&8B10 "
     "8F18&7B4 7F5&8B11 8F19&7B5 7F6&8B12 7B6 7F7&8B13 7B7 7F8&8B14 7B8 7F9&8B15 7B9 8I16 8W16 8I17 8W17 "
     "8I18 8W18 8I19 8W19\n"},
};

TEST(DualPipe, MatchesTheAuthorsRuntime) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(testing::Message() << "pp " << c.pp << " m " << c.microbatches);
    const ActionSchedule s = dualpipe_schedule(c.pp, c.microbatches);
    EXPECT_EQ(format_schedule(s), c.expected);
    EXPECT_EQ(parse_schedule(format_schedule(s), "dualpipe"), s);
    EXPECT_EQ(parse_schedule(format_csv(s), "dualpipe"), s);
  }
}

// Every order is read as the bidirectional layout and passes the checks:
// each stage runs forward and backward of exactly its pipeline's half of the
// microbatches, and the order runs without deadlock.
TEST(DualPipe, IsAValidBidirectionalSchedule) {
  for (int32_t pp : {2, 4, 6, 8})
    for (int32_t m : {2 * pp, 2 * pp + 2, 4 * pp, 6 * pp}) {
      SCOPED_TRACE(testing::Message() << "pp " << pp << " m " << m);
      const ActionSchedule s = dualpipe_schedule(pp, m);
      PipelineShape shape{.pp = pp, .virtual_stages = 2, .microbatches = m};
      shape.layout = infer_layout(s, shape, "dualpipe");
      EXPECT_EQ(shape.layout, StageLayout::kBidirectional);
      EXPECT_NO_THROW(validate_actions(s, shape, "dualpipe"));
      for (int32_t r = 0; r < pp; ++r) {
        int32_t passes = 0;
        for (const auto& a : s[static_cast<size_t>(r)]) passes += a && a->type != ActionType::kBackwardWeight;
        // Two stages, each a forward and a backward (B or I) of m/2 microbatches.
        EXPECT_EQ(passes, 2 * m) << "rank " << r;
      }
    }
}

TEST(DualPipe, RefusesWhatItsRuntimeRefuses) {
  EXPECT_THROW(dualpipe_schedule(3, 12), Error);  // odd pp
  EXPECT_THROW(dualpipe_schedule(0, 4), Error);
  EXPECT_THROW(dualpipe_schedule(4, 6), Error);   // fewer than 2·pp microbatches
  EXPECT_THROW(dualpipe_schedule(4, 11), Error);  // odd microbatch count
}

// A microbatch of the wrong pipeline is refused with its rank and step.
TEST(DualPipe, ValidationNamesAMicrobatchOnTheOtherPipeline) {
  ActionSchedule s = dualpipe_schedule(2, 4);
  PipelineShape shape{.pp = 2, .virtual_stages = 2, .microbatches = 4};
  shape.layout = StageLayout::kBidirectional;
  s[0][0]->microbatch = 3;  // 0F3: microbatch 3 runs stages 2 and 3
  try {
    validate_actions(s, shape, "dp.txt");
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0, step 0: 0F3 names microbatch 3, which the other pipeline runs"),
              std::string::npos)
        << e.what();
  }
}

// The engine, communication free, a pair run back to back: DualPipe on pp
// ranks with m microbatches ends exactly when DualPipeV on pp/2 ranks with
// m/2 does (each half of the ranks runs DualPipeV's order, mirrored), for
// the stage times DualPipeV's test uses. Every rank is busy m·(F + I + W), so
// the bubble is DualPipeV's, (pp/2 − 1)·(F + I − W) for W ≤ I, within the
// authors' README figure (PP/2 − 1)·(F&B + B − 3W), PP = pp ranks here.
TEST(DualPipe, RunsAsLongAsDualPipeVOnHalfTheRanks) {
  using synthetic_support::synthetic_end_ns;
  for (const StageTimes& t : {StageTimes{TimeNs(100), TimeNs(100), TimeNs(100)},
                              StageTimes{TimeNs(100), TimeNs(110), TimeNs(70)},
                              StageTimes{TimeNs(120), TimeNs(100), TimeNs(90)},
                              StageTimes{TimeNs(90), TimeNs(140), TimeNs(30)}}) {
    const int64_t f = t.forward.count(), i = t.backward_input.count(), w = t.backward_weight.count();
    for (auto [pp, m] : {std::pair{2, 4}, {4, 8}, {4, 12}, {6, 12}, {8, 20}, {8, 40}}) {
      SCOPED_TRACE(testing::Message() << "F " << f << " I " << i << " W " << w << " pp " << pp << " m " << m);
      SyntheticPipeline bidirectional;
      bidirectional.shape = {.pp = pp, .virtual_stages = 2, .microbatches = m};
      bidirectional.shape.layout = StageLayout::kBidirectional;
      bidirectional.per_stage = {t};
      bidirectional.order = to_schedule(dualpipe_schedule(pp, m), bidirectional.shape, "dualpipe");
      SyntheticPipeline v;
      v.shape = {.pp = pp / 2, .virtual_stages = 2, .microbatches = m / 2};
      v.shape.layout = StageLayout::kV;
      v.per_stage = {t};
      v.order = to_schedule(dualpipev_schedule(pp / 2, m / 2), v.shape, "dualpipev");
      const int64_t end = synthetic_end_ns(bidirectional);
      EXPECT_EQ(end, synthetic_end_ns(v));
      const int64_t bubble = end - m * (f + i + w);
      const int64_t full_backward = i + w, pair = f + full_backward;
      EXPECT_LE(bubble, (pp / 2 - 1) * (pair + full_backward - 3 * w));
      if (w <= i && f >= i - w) {
        EXPECT_EQ(bubble, (pp / 2 - 1) * (f + i - w));
      }
    }
  }
}

}  // namespace
}  // namespace lacuna::schedule
