#include "sim/network/fluid.h"

#include "sim/core/error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <random>
#include <vector>

namespace lacuna::network {
namespace {

using U = std::vector<Usage>;

FluidNetwork net(std::vector<double> caps) {
  std::vector<uint8_t> binding(caps.size(), 1);
  return FluidNetwork(std::move(caps), std::move(binding));
}

// One change settled at once (the engine's settle event right after it): the
// reports then describe that change alone.
FlowId add(FluidNetwork& n, TimeNs now, double work, const U& u) {
  n.clear_reports();
  const FlowId id = n.add(now, work, u);
  n.settle(now);
  return id;
}

void remove(FluidNetwork& n, TimeNs now, FlowId id) {
  n.clear_reports();
  n.remove(now, id);
  n.settle(now);
}

TEST(Fluid, TwoFlowsOnOneLinkGetHalfEach) {
  FluidNetwork n = net({100});
  const U u = {{0, 1.0}};
  const FlowId a = add(n, 0_ns, 1000, u);
  const FlowId b = add(n, 0_ns, 1000, u);
  EXPECT_DOUBLE_EQ(n.rate(a), 50);
  EXPECT_DOUBLE_EQ(n.rate(b), 50);
  EXPECT_DOUBLE_EQ(n.load(0), 100);
}

TEST(Fluid, FlowLimitedElsewhereLeavesTheRestToTheOther) {
  FluidNetwork n = net({100, 30});
  const U both = {{0, 1.0}, {1, 1.0}};
  const U first = {{0, 1.0}};
  const FlowId a = add(n, 0_ns, 1000, both);
  const FlowId b = add(n, 0_ns, 1000, first);
  EXPECT_DOUBLE_EQ(n.rate(a), 30);
  EXPECT_DOUBLE_EQ(n.rate(b), 70);
}

TEST(Fluid, ParkingLot) {
  // A long flow over three links of capacity 1, 2, 3 and one short flow per
  // link: max-min gives the long flow and the first short one 1/2, then the
  // others take what is left: 3/2 and 5/2.
  FluidNetwork n = net({1, 2, 3});
  const U lng = {{0, 1.0}, {1, 1.0}, {2, 1.0}};
  const FlowId f0 = add(n, 0_ns, 1e9, lng);
  const U s1 = {{0, 1.0}}, s2 = {{1, 1.0}}, s3 = {{2, 1.0}};
  const FlowId f1 = add(n, 0_ns, 1e9, s1);
  const FlowId f2 = add(n, 0_ns, 1e9, s2);
  const FlowId f3 = add(n, 0_ns, 1e9, s3);
  EXPECT_DOUBLE_EQ(n.rate(f0), 0.5);
  EXPECT_DOUBLE_EQ(n.rate(f1), 0.5);
  EXPECT_DOUBLE_EQ(n.rate(f2), 1.5);
  EXPECT_DOUBLE_EQ(n.rate(f3), 2.5);
}

TEST(Fluid, WeightedCoefficients) {
  // Consumption 2·r and 1·r on a 90 B/s link: both run at 30, using 60 and 30.
  FluidNetwork n = net({90, 1000});
  const U heavy = {{0, 2.0}};
  const U light = {{0, 1.0}, {1, 1.0}};
  const FlowId a = add(n, 0_ns, 1e6, heavy);
  EXPECT_DOUBLE_EQ(n.rate(a), 45);  // alone: 90 / 2
  const FlowId b = add(n, 0_ns, 1e6, light);
  EXPECT_DOUBLE_EQ(n.rate(a), 30);
  EXPECT_DOUBLE_EQ(n.rate(b), 30);
  EXPECT_DOUBLE_EQ(n.load(0), 90);
  EXPECT_DOUBLE_EQ(n.load(1), 30);
}

TEST(Fluid, FinishTimesFollowRateChanges) {
  FluidNetwork n = net({100});
  const U u = {{0, 1.0}};
  const FlowId a = add(n, 0_ns, 100, u);
  EXPECT_EQ(n.finish(a), TimeNs::from_seconds(1.0));
  const TimeNs half = TimeNs::from_seconds(0.5);
  const FlowId b = add(n, half, 100, u);
  // A has 50 left at 50 B/s; B does 50 by then and the last 50 alone.
  EXPECT_EQ(n.finish(a), TimeNs::from_seconds(1.5));
  ASSERT_EQ(n.rescheduled().size(), 2u);
  remove(n, n.finish(a), a);
  EXPECT_EQ(n.finish(b), TimeNs::from_seconds(2.0));
  ASSERT_EQ(n.rescheduled().size(), 1u);
  EXPECT_EQ(n.rescheduled()[0], b);
}

TEST(Fluid, FinishIsRoundedUpToWholeNanoseconds) {
  FluidNetwork n = net({3e9});
  const U u = {{0, 1.0}};
  const FlowId a = add(n, 0_ns, 10, u);  // 3.33 ns
  EXPECT_EQ(n.finish(a), 4_ns);
}

TEST(Fluid, OtherComponentsKeepTheirRatesAndAreNotRescheduled) {
  FluidNetwork n = net({100, 100});
  const U u0 = {{0, 1.0}}, u1 = {{1, 1.0}};
  const FlowId c = add(n, 0_ns, 1000, u1);
  const TimeNs before = n.finish(c);
  add(n, 1_ns, 1000, u0);
  const FlowId b = add(n, 2_ns, 1000, u0);
  for (FlowId id : n.rescheduled()) EXPECT_NE(id, c);
  EXPECT_EQ(n.finish(c), before);
  remove(n, 3_ns, b);
  for (FlowId id : n.rescheduled()) EXPECT_NE(id, c);
}

TEST(Fluid, NonBindingLinkCarriesLoadButNeverLimits) {
  FluidNetwork n({10, 100}, {0, 1});
  const U u = {{0, 1.0}, {1, 1.0}};
  const FlowId a = add(n, 0_ns, 1000, u);
  EXPECT_DOUBLE_EQ(n.rate(a), 100);
  EXPECT_DOUBLE_EQ(n.load(0), 100);
  remove(n, 1_ns, a);
  EXPECT_EQ(n.load(0), 0);
  EXPECT_EQ(n.load(1), 0);
}

TEST(Fluid, FinishedFlowStopsTakingBandwidthAtTheNextSolve) {
  // A's fluid part ends at 1 s but its owner removes it later (latency). A
  // flow arriving in between gets the whole link.
  FluidNetwork n = net({100});
  const U u = {{0, 1.0}};
  const FlowId a = add(n, 0_ns, 100, u);
  const FlowId b = add(n, TimeNs::from_seconds(1.5), 100, u);
  EXPECT_FALSE(n.attached(a));
  EXPECT_DOUBLE_EQ(n.rate(b), 100);
  EXPECT_EQ(n.finish(a), TimeNs::from_seconds(1.0));  // unchanged
  remove(n, TimeNs::from_seconds(2.0), a);
  EXPECT_DOUBLE_EQ(n.rate(b), 100);
}

// Max-min rates of every flow solved from scratch, the textbook way: raise
// all unfrozen flows together until a link fills, freeze its flows, repeat.
std::vector<double> reference_rates(const std::vector<double>& caps, const std::vector<U>& flows,
                                    const std::vector<bool>& alive) {
  std::vector<double> rate(flows.size(), 0.0);
  std::vector<bool> frozen(flows.size(), false);
  for (size_t f = 0; f < flows.size(); ++f) frozen[f] = !alive[f];
  std::vector<double> used(caps.size(), 0.0);
  for (;;) {
    double level = std::numeric_limits<double>::infinity();
    for (size_t l = 0; l < caps.size(); ++l) {
      double w = 0;
      for (size_t f = 0; f < flows.size(); ++f) {
        if (frozen[f]) continue;
        for (const Usage& u : flows[f]) {
          if (u.link == l) w += u.coefficient;
        }
      }
      if (w > 0) level = std::min(level, (caps[l] - used[l]) / w);
    }
    if (!std::isfinite(level)) break;
    std::vector<size_t> freeze;
    for (size_t l = 0; l < caps.size(); ++l) {
      double w = 0;
      for (size_t f = 0; f < flows.size(); ++f) {
        if (frozen[f]) continue;
        for (const Usage& u : flows[f]) {
          if (u.link == l) w += u.coefficient;
        }
      }
      if (w > 0 && (caps[l] - used[l]) / w <= level * (1 + 1e-9)) {
        for (size_t f = 0; f < flows.size(); ++f) {
          if (frozen[f]) continue;
          for (const Usage& u : flows[f]) {
            if (u.link == l) freeze.push_back(f);
          }
        }
      }
    }
    std::sort(freeze.begin(), freeze.end());
    freeze.erase(std::unique(freeze.begin(), freeze.end()), freeze.end());
    for (size_t f : freeze) {
      frozen[f] = true;
      rate[f] = level;
      for (const Usage& u : flows[f]) used[u.link] += u.coefficient * level;
    }
  }
  return rate;
}

// One to four distinct links of `num_links`, each with a coefficient in
// [0.25, 4).
U random_usage(std::mt19937& rng, int num_links) {
  U u;
  const int k = std::uniform_int_distribution<int>(1, 4)(rng);
  for (int i = 0; i < k; ++i) {
    const LinkId l = static_cast<LinkId>(std::uniform_int_distribution<int>(0, num_links - 1)(rng));
    if (std::any_of(u.begin(), u.end(), [&](const Usage& x) { return x.link == l; })) continue;
    u.push_back(Usage{l, std::uniform_real_distribution<double>(0.25, 4.0)(rng)});
  }
  return u;
}

TEST(Fluid, IncrementalEqualsFullRecompute) {
  for (uint32_t seed : {1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u}) {
    std::mt19937 rng(seed);
    const int num_links = std::uniform_int_distribution<int>(3, 24)(rng);
    std::vector<double> caps;
    for (int l = 0; l < num_links; ++l) caps.push_back(std::uniform_real_distribution<double>(10, 1000)(rng));
    FluidNetwork n = net(caps);
    std::deque<U> storage;          // stable addresses for the network's spans
    std::vector<const U*> usage_of;  // by FlowId
    std::vector<FlowId> live;
    for (int step = 0; step < 300; ++step) {
      const bool adding = live.empty() || std::uniform_int_distribution<int>(0, 9)(rng) < 6;
      if (adding) {
        storage.push_back(random_usage(rng, num_links));
        const FlowId id = add(n, 0_ns, 1e12, storage.back());
        if (usage_of.size() <= id) usage_of.resize(id + 1, nullptr);
        usage_of[id] = &storage.back();
        live.push_back(id);
      } else {
        const size_t pick = std::uniform_int_distribution<size_t>(0, live.size() - 1)(rng);
        remove(n, 0_ns, live[pick]);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(pick));
      }
      std::vector<U> flows;
      for (FlowId id : live) flows.push_back(*usage_of[id]);
      const std::vector<double> want = reference_rates(caps, flows, std::vector<bool>(flows.size(), true));
      for (size_t i = 0; i < live.size(); ++i) {
        ASSERT_NEAR(n.rate(live[i]), want[i], 1e-9 * want[i]) << "seed " << seed << " step " << step;
      }
      for (int l = 0; l < num_links; ++l) {
        double load = 0;
        for (size_t i = 0; i < live.size(); ++i) {
          for (const Usage& u : flows[i]) {
            if (u.link == static_cast<LinkId>(l)) load += u.coefficient * want[i];
          }
        }
        ASSERT_NEAR(n.load(static_cast<LinkId>(l)), load, 1e-6 * (1 + load)) << "seed " << seed << " link " << l;
        ASSERT_LE(n.load(static_cast<LinkId>(l)), caps[l] * (1 + 1e-9));
      }
    }
    // The shortcuts past a solve were taken, and checked above.
    EXPECT_GT(n.counters().fitted, 0u) << "seed " << seed;
    EXPECT_GT(n.counters().quiet_removes, 0u) << "seed " << seed;
    EXPECT_GT(n.counters().solves, 0u) << "seed " << seed;
  }
}

TEST(Fluid, ChangesAtOneTimeAreSolvedOncePerComponent) {
  // A spans links 0 and 1; B (link 0) and C (link 1) join it at the same
  // time. Eagerly that is two solves of A's component; settled together, one.
  FluidNetwork n = net({100, 100, 100});
  const U both = {{0, 1.0}, {1, 1.0}}, first = {{0, 1.0}}, second = {{1, 1.0}}, other = {{2, 1.0}};
  const FlowId a = add(n, 0_ns, 1e6, both);
  const uint64_t solves = n.counters().solves;
  n.clear_reports();
  const FlowId b = n.add(5_ns, 1e6, first);
  const FlowId c = n.add(5_ns, 1e6, second);
  const FlowId d = n.add(5_ns, 1e6, other);  // alone: no solve
  EXPECT_DOUBLE_EQ(n.rate(d), 100);           // at once
  EXPECT_TRUE(n.unsettled());
  n.settle(5_ns);
  EXPECT_FALSE(n.unsettled());
  EXPECT_EQ(n.counters().solves, solves + 1);
  EXPECT_DOUBLE_EQ(n.rate(a), 50);
  EXPECT_DOUBLE_EQ(n.rate(b), 50);
  EXPECT_DOUBLE_EQ(n.rate(c), 50);
  EXPECT_DOUBLE_EQ(n.rate(d), 100);
  // Every added flow and A (whose rate halved) are reported, each once.
  std::vector<FlowId> got(n.rescheduled().begin(), n.rescheduled().end());
  std::sort(got.begin(), got.end());
  std::vector<FlowId> want = {a, b, c, d};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want);
}

TEST(Fluid, AChangeAtALaterTimeBeforeTheSettleIsRefused) {
  FluidNetwork n = net({100});
  const U u = {{0, 1.0}};
  n.add(0_ns, 100, u);  // alone: settled at once
  EXPECT_FALSE(n.unsettled());
  n.add(0_ns, 100, u);  // shares the link: waits for the settle
  EXPECT_TRUE(n.unsettled());
  EXPECT_THROW(n.add(1_ns, 100, u), Error);
  EXPECT_THROW(n.settle(1_ns), Error);
  n.settle(0_ns);
  EXPECT_NO_THROW(n.add(1_ns, 100, u));
}

TEST(Fluid, AnAddedThenRemovedFlowLeavesNoTrace) {
  FluidNetwork n = net({100});
  const U u = {{0, 1.0}};
  const FlowId a = add(n, 0_ns, 1000, u);
  n.clear_reports();
  const FlowId b = n.add(10_ns, 1000, u);
  n.remove(10_ns, b);
  n.settle(10_ns);
  EXPECT_DOUBLE_EQ(n.rate(a), 100);
  EXPECT_DOUBLE_EQ(n.load(0), 100);
  EXPECT_EQ(n.active_flows(), 1u);
  for (FlowId id : n.rescheduled()) EXPECT_NE(id, b);
}

TEST(Fluid, AnOverhangKeepsItsUsageWhenTheIdIsReused) {
  // A's fluid part ends at 1 s; its owner removes it at 2 s, and a flow on
  // another link, added at the same time, takes A's id. The overhang still
  // names A's link.
  FluidNetwork n = net({100, 100});
  const U u0 = {{0, 1.0}}, u1 = {{1, 1.0}};
  const FlowId a = add(n, 0_ns, 100, u0);
  n.clear_reports();
  const TimeNs t = TimeNs::from_seconds(2.0);
  n.remove(t, a);
  const FlowId c = n.add(t, 100, u1);
  n.settle(t);
  EXPECT_EQ(c, a);
  ASSERT_EQ(n.overhangs().size(), 1u);
  ASSERT_EQ(n.overhangs()[0].usage.size(), 1u);
  EXPECT_EQ(n.overhangs()[0].usage[0].link, 0u);
  EXPECT_EQ(n.overhangs()[0].held, TimeNs::from_seconds(1.0));
  EXPECT_DOUBLE_EQ(n.rate(c), 100);
}

TEST(Fluid, AnEndThatLeavesEveryBottleneckInPlaceSkipsTheSolve) {
  // f and g tie at 1 on link 0 (capacity 2); g is also bottlenecked on link 1
  // (capacity 1), which f does not use. f ending frees link 0 but g stays.
  FluidNetwork n = net({2, 1});
  const U fu = {{0, 1.0}}, gu = {{0, 1.0}, {1, 1.0}};
  const FlowId g = add(n, 0_ns, 1e9, gu);
  const FlowId f = add(n, 0_ns, 1e9, fu);
  EXPECT_DOUBLE_EQ(n.rate(g), 1);
  EXPECT_DOUBLE_EQ(n.rate(f), 1);
  const uint64_t solves = n.counters().solves;
  remove(n, 5_ns, f);
  EXPECT_EQ(n.counters().solves, solves);
  EXPECT_EQ(n.counters().quiet_removes, 1u);
  EXPECT_DOUBLE_EQ(n.rate(g), 1);
  EXPECT_TRUE(n.rescheduled().empty());
}

TEST(Fluid, AnEndThatReleasesABottleneckIsSolved) {
  // Link 1 (capacity 1): f and h at 0.5. Link 0 (capacity 2): h and g, g at
  // 1.5. f ending lets h rise on link 1, which takes from g on link 0: both 1.
  FluidNetwork n = net({2, 1});
  const U gu = {{0, 1.0}}, hu = {{0, 1.0}, {1, 1.0}}, fu = {{1, 1.0}};
  const FlowId g = add(n, 0_ns, 1e9, gu);
  const FlowId h = add(n, 0_ns, 1e9, hu);
  const FlowId f = add(n, 0_ns, 1e9, fu);
  EXPECT_DOUBLE_EQ(n.rate(f), 0.5);
  EXPECT_DOUBLE_EQ(n.rate(h), 0.5);
  EXPECT_DOUBLE_EQ(n.rate(g), 1.5);
  remove(n, 5_ns, f);
  EXPECT_EQ(n.counters().quiet_removes, 0u);
  EXPECT_DOUBLE_EQ(n.rate(h), 1);
  EXPECT_DOUBLE_EQ(n.rate(g), 1);
}

TEST(Fluid, AnAddThatFitsIntoTheSlackSkipsTheSolve) {
  // g runs at 1 on link 0 (capacity 4), held by link 1 (capacity 1). f joins
  // link 0 alone otherwise: it takes the slack, 3, and g keeps its rate.
  FluidNetwork n = net({4, 1});
  const U gu = {{0, 1.0}, {1, 1.0}}, fu = {{0, 1.0}};
  const FlowId g = add(n, 0_ns, 1e9, gu);
  const uint64_t solves = n.counters().solves;
  const FlowId f = add(n, 1_ns, 1e9, fu);
  EXPECT_EQ(n.counters().solves, solves);
  EXPECT_EQ(n.counters().fitted, 1u);
  EXPECT_DOUBLE_EQ(n.rate(f), 3);
  EXPECT_DOUBLE_EQ(n.rate(g), 1);
  ASSERT_EQ(n.rescheduled().size(), 1u);
  EXPECT_EQ(n.rescheduled()[0], f);
  // A second one cannot fit (link 0 is full): the solve shares it, 1.5 each.
  const FlowId e = add(n, 2_ns, 1e9, fu);
  EXPECT_EQ(n.counters().fitted, 1u);
  EXPECT_DOUBLE_EQ(n.rate(e), 1.5);
  EXPECT_DOUBLE_EQ(n.rate(f), 1.5);
  EXPECT_DOUBLE_EQ(n.rate(g), 1);
}

TEST(Fluid, BatchesOfChangesEqualFullRecompute) {
  // Random adds and removes, settled in batches of 1 to 6 at one time each:
  // after every settle the rates are the max-min rates of the live flows.
  for (uint32_t seed : {11u, 12u, 13u, 14u, 15u, 16u}) {
    std::mt19937 rng(seed);
    const int num_links = std::uniform_int_distribution<int>(3, 16)(rng);
    std::vector<double> caps;
    for (int l = 0; l < num_links; ++l) caps.push_back(std::uniform_real_distribution<double>(10, 1000)(rng));
    FluidNetwork n = net(caps);
    std::deque<U> storage;
    std::vector<const U*> usage_of;
    std::vector<FlowId> live;
    TimeNs now = 0_ns;
    for (int batch = 0; batch < 80; ++batch) {
      now += 1_ns;
      const int changes = std::uniform_int_distribution<int>(1, 6)(rng);
      for (int k = 0; k < changes; ++k) {
        if (live.empty() || std::uniform_int_distribution<int>(0, 9)(rng) < 6) {
          storage.push_back(random_usage(rng, num_links));
          const FlowId id = n.add(now, 1e12, storage.back());
          if (usage_of.size() <= id) usage_of.resize(id + 1, nullptr);
          usage_of[id] = &storage.back();
          live.push_back(id);
        } else {
          const size_t pick = std::uniform_int_distribution<size_t>(0, live.size() - 1)(rng);
          n.remove(now, live[pick]);
          live.erase(live.begin() + static_cast<std::ptrdiff_t>(pick));
        }
      }
      n.settle(now);
      std::vector<U> flows;
      for (FlowId id : live) flows.push_back(*usage_of[id]);
      const std::vector<double> want = reference_rates(caps, flows, std::vector<bool>(flows.size(), true));
      for (size_t i = 0; i < live.size(); ++i) {
        ASSERT_NEAR(n.rate(live[i]), want[i], 1e-9 * want[i]) << "seed " << seed << " batch " << batch;
      }
    }
    // Batches whose removals left their links empty need no settle.
    EXPECT_LE(n.counters().settles, 80u);
    EXPECT_GT(n.counters().settles, 40u);
  }
}

}  // namespace
}  // namespace lacuna::network
