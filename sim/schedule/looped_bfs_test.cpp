#include "sim/schedule/looped_bfs.h"

#include <gtest/gtest.h>

#include <tuple>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/schedule/synthetic_test_support.h"
#include "sim/schedule/validate_actions.h"

namespace lacuna::schedule {
namespace {

// PyTorch's ScheduleLoopedBFS on pp 2 × v 2 with 3 microbatches: every
// forward of chunk 0, then of chunk 1; the backwards last chunk first, last
// microbatch first.
TEST(LoopedBfs, ClosedFormOrder) {
  EXPECT_EQ(format_schedule(looped_bfs_schedule(2, 2, 3)),
            "rank 0: 0F0 0F1 0F2 2F0 2F1 2F2 2B2 2B1 2B0 0B2 0B1 0B0\n"
            "rank 1: 1F0 1F1 1F2 3F0 3F1 3F2 3B2 3B1 3B0 1B2 1B1 1B0\n");
  EXPECT_THROW(looped_bfs_schedule(2, 0, 3), Error);
  EXPECT_THROW(looped_bfs_schedule(2, 2, 0), Error);
}

// For a spread of shapes the order validates, round-trips through text, and
// runs on the engine to the closed form: with m ≥ pp, free transfers,
// forward f and backward b per chunk, each rank's forwards and backwards run
// back to back, so the iteration is v·m·(f + b) + (pp − 1)·(f + b), a
// bubble of (pp − 1)/(v·m), interleaved 1F1B's.
TEST(LoopedBfs, ValidatesAndRunsToTheClosedForm) {
  using synthetic_support::synthetic_end_ns;
  const int64_t f = 120, b = 240;
  for (const auto& [pp, v, m] : {std::tuple{2, 2, 2}, {4, 2, 4}, {4, 3, 8}, {3, 4, 5}, {8, 2, 8}, {2, 1, 3}}) {
    SCOPED_TRACE(fmt::format("pp {} v {} m {}", pp, v, m));
    const PipelineShape shape{.pp = pp, .virtual_stages = v, .microbatches = m};
    const ActionSchedule s = looped_bfs_schedule(pp, v, m);
    EXPECT_NO_THROW(validate_actions(s, shape, "bfs.txt"));
    EXPECT_EQ(parse_schedule(format_schedule(s), "bfs.txt"), s);
    SyntheticPipeline p;
    p.shape = shape;
    p.per_stage = {{TimeNs(f), TimeNs(b - 100), TimeNs(100)}};
    p.order = to_schedule(s, shape, "bfs.txt");
    EXPECT_EQ(synthetic_end_ns(p), static_cast<int64_t>(v) * m * (f + b) + (pp - 1) * (f + b));
  }
}

}  // namespace
}  // namespace lacuna::schedule
