#include "sim/schedule/lower_dp.h"

#include <gtest/gtest.h>

#include <functional>

#include "sim/core/error.h"
#include "sim/core/error_testing.h"
#include "sim/proto/scenario.pb.h"
#include "sim/schedule/dualpipev.h"
#include "sim/schedule/lower_p2p.h"
#include "sim/schedule/validate_actions.h"

namespace lacuna::schedule {
namespace {

using lacuna::scenario::ScheduleKind;
using testing_support::formatted_error_of;

constexpr DpSettings kOverlapped{.reduce = true, .unshard = true, .overlap_reduce = true, .overlap_gather = true};
constexpr DpSettings kAtTheEnd{.reduce = true, .unshard = false, .overlap_reduce = false};

ActionSchedule built(ScheduleKind kind, const PipelineShape& shape) {
  return to_actions(build_schedule(kind, shape), shape);
}

// 1F1B, pp 2, m 3: each rank gathers its stage first and reduces it right
// after its last backward (PyTorch's _add_reduce_grad: the stage's backward
// count reaching its microbatches).
TEST(LowerDp, OneFOneBClosedForm) {
  const PipelineShape shape{.pp = 2, .virtual_stages = 1, .microbatches = 3};
  EXPECT_EQ(format_schedule(add_dp_actions(built(lacuna::scenario::ONE_F_ONE_B, shape), shape, kOverlapped)),
            "rank 0: 0UNSHARD 0F0 0F1 0B0 0F2 0B1 0B2 0REDUCE_GRAD\n"
            "rank 1: 1UNSHARD 1F0 1B0 1F1 1B1 1F2 1B2 1REDUCE_GRAD\n");
}

// Interleaved, pp 2 × v 2, m 2: stage 2 (rank 0's chunk 1) finishes its
// backwards first, so its reduction leaves mid-list, while stage 0 still has
// a backward to run; without overlap both wait for the end, in the order the
// chunks finished.
TEST(LowerDp, InterleavedReducesEachChunkWhenItsGradientsAreComplete) {
  const PipelineShape shape{.pp = 2, .virtual_stages = 2, .microbatches = 2};
  const ActionSchedule s = built(lacuna::scenario::INTERLEAVED_1F1B, shape);
  EXPECT_EQ(format_schedule(s), "rank 0: 0F0 0F1 2F0 2F1 2B0 2B1 0B0 0B1\nrank 1: 1F0 1F1 3F0 3B0 3F1 3B1 1B0 1B1\n");
  EXPECT_EQ(format_schedule(add_dp_actions(s, shape, kOverlapped)),
            "rank 0: 0UNSHARD 2UNSHARD 0F0 0F1 2F0 2F1 2B0 2B1 2REDUCE_GRAD 0B0 0B1 0REDUCE_GRAD\n"
            "rank 1: 1UNSHARD 3UNSHARD 1F0 1F1 3F0 3B0 3F1 3B1 3REDUCE_GRAD 1B0 1B1 1REDUCE_GRAD\n");
  EXPECT_EQ(format_schedule(add_dp_actions(s, shape, kAtTheEnd)),
            "rank 0: 0F0 0F1 2F0 2F1 2B0 2B1 0B0 0B1 2REDUCE_GRAD 0REDUCE_GRAD\n"
            "rank 1: 1F0 1F1 3F0 3B0 3F1 3B1 1B0 1B1 3REDUCE_GRAD 1REDUCE_GRAD\n");
  // Without data parallelism the pass adds nothing.
  EXPECT_EQ(add_dp_actions(s, shape, DpSettings{}), s);
}

// Zero-bubble passes: a stage's gradients are complete after its last W.
TEST(LowerDp, ZeroBubbleReducesAfterTheLastWeightPass) {
  const PipelineShape shape{.pp = 2, .virtual_stages = 1, .microbatches = 2};
  const ActionSchedule s = add_dp_actions(built(lacuna::scenario::ZB_H1, shape), shape, kOverlapped);
  for (const RankActions& rank : s) {
    ASSERT_GE(rank.size(), 2u);
    EXPECT_EQ(rank.back()->type, ActionType::kReduceGrad);
    EXPECT_EQ(rank[rank.size() - 2]->type, ActionType::kBackwardWeight);
  }
}

// For every built-in schedule and a spread of shapes: the pass's actions
// round-trip through the text form, read back as each chunk reduced after
// its last B or W and gathered in chunk order, pass validation, commute with
// the p2p pass (a reduction goes after the calls of the pass it follows),
// and are dropped and placed again identically.
TEST(LowerDp, RoundTripsForEveryBuiltInSchedule) {
  struct Case {
    ScheduleKind kind;
    PipelineShape shape;
  };
  std::vector<Case> cases;
  for (int32_t pp : {1, 2, 3, 4})
    for (int32_t m : {1, 2, 3, 8}) {
      for (ScheduleKind k : {lacuna::scenario::GPIPE, lacuna::scenario::ONE_F_ONE_B, lacuna::scenario::ZB_H1})
        cases.push_back({k, {.pp = pp, .virtual_stages = 1, .microbatches = m}});
      if (pp >= 2 && m % pp == 0)
        cases.push_back({lacuna::scenario::INTERLEAVED_1F1B, {.pp = pp, .virtual_stages = 2, .microbatches = m}});
    }
  for (const Case& c : cases)
    for (const DpSettings& settings : {kOverlapped, kAtTheEnd}) {
      SCOPED_TRACE(testing::Message() << lacuna::scenario::ScheduleKind_Name(c.kind) << " pp " << c.shape.pp << " v "
                                      << c.shape.virtual_stages << " m " << c.shape.microbatches << " overlap "
                                      << settings.overlap_reduce);
      const ActionSchedule plain = built(c.kind, c.shape);
      const ActionSchedule s = add_dp_actions(plain, c.shape, settings);
      ASSERT_EQ(parse_schedule(format_schedule(s), "t"), s);
      EXPECT_NO_THROW(validate_actions(s, c.shape, "t"));
      EXPECT_EQ(add_dp_actions(s, c.shape, settings), s);
      EXPECT_EQ(lower_p2p(s, c.kind, c.shape), add_dp_actions(lower_p2p(plain, c.kind, c.shape), c.shape, settings));
      const auto passes = build_schedule(c.kind, c.shape);
      for (int32_t r = 0; r < c.shape.pp; ++r) {
        const DpPoints p = dp_points_of(s, r, c.shape, settings, "t");
        const auto& mine = passes[static_cast<size_t>(r)];
        for (int32_t chunk = 0; chunk < c.shape.virtual_stages; ++chunk) {
          int32_t last = -1;
          for (int32_t i = 0; i < static_cast<int32_t>(mine.size()); ++i)
            if (mine[i].chunk == chunk && (mine[i].pass == Pass::kBackward || mine[i].pass == Pass::kBackwardWeight))
              last = i;
          EXPECT_EQ(p.reduce_after[chunk], settings.overlap_reduce ? last : static_cast<int32_t>(mine.size()) - 1);
        }
        EXPECT_EQ(p.reduce_order.size(), static_cast<size_t>(c.shape.virtual_stages));
        EXPECT_EQ(p.gather_order.size(), settings.unshard ? static_cast<size_t>(c.shape.virtual_stages) : 0u);
      }
    }
  // DualPipeV's pairs stay whole: no reduction between a forward and its '&'.
  const PipelineShape v{.pp = 4, .virtual_stages = 2, .microbatches = 10, .layout = StageLayout::kV};
  const ActionSchedule d = add_dp_actions(dualpipev_schedule(4, 10), v, kOverlapped);
  EXPECT_EQ(overlapped_pairs(d), overlapped_pairs(dualpipev_schedule(4, 10)));
  EXPECT_NO_THROW(validate_actions(d, v, "t"));
}

// A file that moves the actions: what the compiler reads, and each broken
// placement refused with its rank, step and action.
TEST(LowerDp, ReadsMovedActionsAndRefusesBrokenOnes) {
  const PipelineShape shape{.pp = 2, .virtual_stages = 2, .microbatches = 2};
  auto points = [&](const std::string& text, const DpSettings& settings) {
    return dp_points_of(parse_schedule(text, "s.txt"), 0, shape, settings, "s.txt");
  };
  const std::string rank1 = "rank 1: 1UNSHARD 3UNSHARD 1F0 1F1 3F0 3B0 3F1 3B1 3REDUCE_GRAD 1B0 1B1 1REDUCE_GRAD\n";
  // Stage 2's reduction delayed to the end, gathers reversed.
  const DpPoints moved = points(
      "rank 0: 2UNSHARD 0UNSHARD 0F0 0F1 2F0 2F1 2B0 2B1 0B0 0B1 0REDUCE_GRAD 2REDUCE_GRAD\n" + rank1, kOverlapped);
  EXPECT_EQ(moved.reduce_after, (std::vector<int32_t>{7, 7}));
  EXPECT_EQ(moved.reduce_order, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(moved.gather_order, (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(moved.gather_after, (std::vector<int32_t>{-1, -1}));
  // Stage 2's gathers issued after rank 0's first pass: a lookahead, ahead
  // of 2F0.
  const DpPoints ahead = points(
      "rank 0: 0UNSHARD 0F0 2UNSHARD 0F1 2F0 2F1 2B0 2B1 2REDUCE_GRAD 0B0 0B1 0REDUCE_GRAD\n" + rank1, kOverlapped);
  EXPECT_EQ(ahead.gather_after, (std::vector<int32_t>{-1, 0}));
  EXPECT_EQ(ahead.gather_order, (std::vector<int32_t>{0, 1}));

  auto error = [&](const std::string& rank0, const DpSettings& settings) {
    return formatted_error_of([&] { points(rank0 + rank1, settings); });
  };
  EXPECT_NE(error("rank 0: 0UNSHARD 2UNSHARD 0F0 0F1 2F0 2F1 2B0 2REDUCE_GRAD 2B1 0B0 0B1 0REDUCE_GRAD\n", kOverlapped)
                .find("rank 0, step 7: 2REDUCE_GRAD comes before the stage's last backward (2B1 at step 8): its "
                      "gradients are not complete"),
            std::string::npos);
  DpSettings synchronous_gathers = kOverlapped;
  synchronous_gathers.overlap_gather = false;
  EXPECT_NE(error("rank 0: 0UNSHARD 0F0 2UNSHARD 0F1 2F0 2F1 2B0 2B1 2REDUCE_GRAD 0B0 0B1 0REDUCE_GRAD\n",
                  synchronous_gathers)
                .find("rank 0, step 2: 2UNSHARD comes after the rank's first pass (step 1): without "
                      "parallel.overlap_param_gather"),
            std::string::npos);
  EXPECT_NE(error("rank 0: 0UNSHARD 0F0 0F1 2F0 2UNSHARD 2F1 2B0 2B1 2REDUCE_GRAD 0B0 0B1 0REDUCE_GRAD\n", kOverlapped)
                .find("rank 0, step 4: 2UNSHARD comes after the stage's first forward (2F0 at step 3)"),
            std::string::npos);
  EXPECT_NE(error("rank 0: 0UNSHARD 2UNSHARD 0F0 0F1 2F0 2F1 2B0 2B1 2REDUCE_GRAD 0B0 0B1\n", kOverlapped)
                .find("stage 0 has no 0REDUCE_GRAD"),
            std::string::npos);
  EXPECT_NE(
      error("rank 0: 0UNSHARD 2UNSHARD 0F0 0F1 2F0 2F1 2B0 2B1 2REDUCE_GRAD 0B0 0B1 0REDUCE_GRAD 0REDUCE_GRAD\n",
            kOverlapped)
          .find("0REDUCE_GRAD is listed twice (first at step 11)"),
      std::string::npos);
  EXPECT_NE(error("rank 0: 0UNSHARD 2UNSHARD 0F0 0F1 2F0 2F1 2B0 2B1 2REDUCE_GRAD 0B0 0B1 0REDUCE_GRAD 0RESHARD\n",
                  kOverlapped)
                .find("0RESHARD: Megatron-LM's distributed optimizer keeps the gathered parameters"),
            std::string::npos);
  EXPECT_NE(error("rank 0: 1UNSHARD 0UNSHARD 2UNSHARD 0F0 0F1 2F0 2F1 2B0 2B1 2REDUCE_GRAD 0B0 0B1 0REDUCE_GRAD\n",
                  kOverlapped)
                .find("1UNSHARD names stage 1, which this rank does not hold"),
            std::string::npos);
  // Without overlap, only the end; without sharding, no UNSHARD.
  EXPECT_NE(error("rank 0: 0F0 0F1 2F0 2F1 2B0 2B1 2REDUCE_GRAD 0B0 0B1 0REDUCE_GRAD\n", kAtTheEnd)
                .find("2REDUCE_GRAD: without parallel.overlap_grad_reduce every gradient is reduced after the "
                      "rank's last pass"),
            std::string::npos);
  EXPECT_NE(error("rank 0: 0UNSHARD 0F0 0F1 2F0 2F1 2B0 2B1 0B0 0B1 2REDUCE_GRAD 0REDUCE_GRAD\n", kAtTheEnd)
                .find("0UNSHARD gathers sharded parameters, but the scenario does not shard them"),
            std::string::npos);
}

}  // namespace
}  // namespace lacuna::schedule
