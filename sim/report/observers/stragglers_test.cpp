// Straggler attribution in closed form: one rank of eight runs 1.5× slower
// (RankBinding.compute_time_scale); see straggler_fixture.h for the program.
#include "sim/report/observers/stragglers.h"

#include <gtest/gtest.h>

#include "sim/engine/simulator.h"
#include "sim/report/observers/straggler_fixture.h"

namespace lacuna::report {
namespace {

StragglerAttribution run(const ir::Program& p, bool fold = false) {
  engine::testing::ClosedFormCost cost;
  engine::Simulator sim(p, cost, {.fold = fold});
  StragglerAttribution s;
  sim.add_observer(&s);
  sim.run();
  return s;
}

// d = 1000, TP 50, DP 100, rank 2 at 1.5×. TP {2,3}: rank 2 arrives at 1500,
// rank 3 at 1000: hold 500. DP {0,2,4,6}: rank 2 at 1500 + 50 + 1500 = 3050,
// the others at 1000 + 50 + 1000 = 2050: hold 1000. DP {1,3,5,7}: rank 3,
// held by the TP all-reduce, at 1500 + 50 + 1000 = 2550, the others at 2050:
// hold 500. The other TP groups arrive together: no straggler.
TEST(Stragglers, OneSlowRankClosedForm) {
  const ir::Program p = testing::slow_rank_program({});
  const StragglerSummary s = run(p).summary();
  EXPECT_EQ(s.instances, 6);
  EXPECT_EQ(s.straggled, 3);
  EXPECT_EQ(s.hold, TimeNs(2000));
  ASSERT_EQ(s.ranks.size(), 3u);
  EXPECT_EQ(s.ranks[0].id, 2);
  EXPECT_EQ(s.ranks[0].group, "dp");
  EXPECT_EQ(s.ranks[0].op, "reduce_scatter");
  EXPECT_EQ(s.ranks[0].cell.hold, TimeNs(1000));
  EXPECT_EQ(s.ranks[0].cell.last, 1);
  EXPECT_EQ(s.ranks[0].cell.instances, 1);
  EXPECT_EQ(s.ranks[1].id, 2);
  EXPECT_EQ(s.ranks[1].group, "tp");
  EXPECT_EQ(s.ranks[1].op, "all_reduce");
  EXPECT_EQ(s.ranks[1].cell.hold, TimeNs(500));
  EXPECT_EQ(s.ranks[2].id, 3);
  EXPECT_EQ(s.ranks[2].group, "dp");
  EXPECT_EQ(s.ranks[2].cell.hold, TimeNs(500));
  // Hosts: only the DP groups span hosts. Host 1 (ranks 2, 3) has a member in
  // both and straggled in both, side by side: its hold intervals [2050, 3050]
  // and [2050, 2550] overlap, so it cost their union, 1000 (not 1000 + 500).
  ASSERT_EQ(s.hosts.size(), 1u);
  EXPECT_EQ(s.hosts[0].id, 1);
  EXPECT_EQ(s.hosts[0].group, "dp");
  EXPECT_EQ(s.hosts[0].cell.instances, 2);
  EXPECT_EQ(s.hosts[0].cell.last, 2);
  EXPECT_DOUBLE_EQ(s.hosts[0].last_fraction(), 1.0);
  EXPECT_EQ(s.hosts[0].cell.hold, TimeNs(1000));
  EXPECT_EQ(host_ranks(p, 1), "2–3");
}

// Peer wait: Σ (start − issued) of each rank's collectives.
TEST(Stragglers, PeerWaitPerRank) {
  const StragglerAttribution a = run(testing::slow_rank_program({}));
  const std::vector<int64_t> expected = {1000, 500, 0, 500, 1000, 500, 1000, 500};
  ASSERT_EQ(a.peer_wait().size(), 8u);
  for (size_t r = 0; r < 8; ++r) EXPECT_EQ(a.peer_wait()[r].count(), expected[r]) << "rank " << r;
}

// Over several rounds the slow rank is the last to arrive in every
// collective of its groups, each round.
TEST(Stragglers, SlowRankIsLastInEveryCollectiveOfItsGroups) {
  for (double scale : {1.1, 1.5, 3.0}) {
    const StragglerSummary s = run(testing::slow_rank_program({.scale = scale, .rounds = 3})).summary();
    int64_t tp_last = 0, dp_last = 0;
    for (const StragglerRow& r : s.ranks) {
      if (r.id != 2) continue;
      EXPECT_EQ(r.cell.instances, 3);
      (r.group == "tp" ? tp_last : dp_last) += r.cell.last;
    }
    EXPECT_EQ(tp_last, 3) << "scale " << scale;
    EXPECT_EQ(dp_last, 3) << "scale " << scale;
  }
}

TEST(Stragglers, NoStragglerWithoutASlowRankAndHostRanges) {
  const StragglerSummary s = run(testing::slow_rank_program({.scale = 1.0})).summary();
  EXPECT_EQ(s.instances, 6);
  EXPECT_EQ(s.straggled, 0);
  EXPECT_TRUE(s.ranks.empty());
  EXPECT_TRUE(s.hosts.empty());
  ir::Program p = testing::slow_rank_program({});
  p.mutable_ranks(5)->set_node(0);
  EXPECT_EQ(host_ranks(p, 0), "0–1, 5");
  EXPECT_EQ(host_ranks(p, 2), "4");
}

}  // namespace
}  // namespace lacuna::report
