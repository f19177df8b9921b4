#include "sim/network/fluid.h"

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

TEST(Fluid, TwoFlowsOnOneLinkGetHalfEach) {
  FluidNetwork n = net({100});
  const U u = {{0, 1.0}};
  const FlowId a = n.add(0_ns, 1000, u);
  const FlowId b = n.add(0_ns, 1000, u);
  EXPECT_DOUBLE_EQ(n.rate(a), 50);
  EXPECT_DOUBLE_EQ(n.rate(b), 50);
  EXPECT_DOUBLE_EQ(n.load(0), 100);
}

TEST(Fluid, FlowLimitedElsewhereLeavesTheRestToTheOther) {
  FluidNetwork n = net({100, 30});
  const U both = {{0, 1.0}, {1, 1.0}};
  const U first = {{0, 1.0}};
  const FlowId a = n.add(0_ns, 1000, both);
  const FlowId b = n.add(0_ns, 1000, first);
  EXPECT_DOUBLE_EQ(n.rate(a), 30);
  EXPECT_DOUBLE_EQ(n.rate(b), 70);
}

TEST(Fluid, ParkingLot) {
  // A long flow over three links of capacity 1, 2, 3 and one short flow per
  // link: max-min gives the long flow and the first short one 1/2, then the
  // others take what is left: 3/2 and 5/2.
  FluidNetwork n = net({1, 2, 3});
  const U lng = {{0, 1.0}, {1, 1.0}, {2, 1.0}};
  const FlowId f0 = n.add(0_ns, 1e9, lng);
  const U s1 = {{0, 1.0}}, s2 = {{1, 1.0}}, s3 = {{2, 1.0}};
  const FlowId f1 = n.add(0_ns, 1e9, s1);
  const FlowId f2 = n.add(0_ns, 1e9, s2);
  const FlowId f3 = n.add(0_ns, 1e9, s3);
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
  const FlowId a = n.add(0_ns, 1e6, heavy);
  EXPECT_DOUBLE_EQ(n.rate(a), 45);  // alone: 90 / 2
  const FlowId b = n.add(0_ns, 1e6, light);
  EXPECT_DOUBLE_EQ(n.rate(a), 30);
  EXPECT_DOUBLE_EQ(n.rate(b), 30);
  EXPECT_DOUBLE_EQ(n.load(0), 90);
  EXPECT_DOUBLE_EQ(n.load(1), 30);
}

TEST(Fluid, FinishTimesFollowRateChanges) {
  FluidNetwork n = net({100});
  const U u = {{0, 1.0}};
  const FlowId a = n.add(0_ns, 100, u);
  EXPECT_EQ(n.finish(a), TimeNs::from_seconds(1.0));
  const TimeNs half = TimeNs::from_seconds(0.5);
  const FlowId b = n.add(half, 100, u);
  // A has 50 left at 50 B/s; B does 50 by then and the last 50 alone.
  EXPECT_EQ(n.finish(a), TimeNs::from_seconds(1.5));
  ASSERT_EQ(n.rescheduled().size(), 2u);
  n.remove(n.finish(a), a);
  EXPECT_EQ(n.finish(b), TimeNs::from_seconds(2.0));
  ASSERT_EQ(n.rescheduled().size(), 1u);
  EXPECT_EQ(n.rescheduled()[0], b);
}

TEST(Fluid, FinishIsRoundedUpToWholeNanoseconds) {
  FluidNetwork n = net({3e9});
  const U u = {{0, 1.0}};
  const FlowId a = n.add(0_ns, 10, u);  // 3.33 ns
  EXPECT_EQ(n.finish(a), 4_ns);
}

TEST(Fluid, OtherComponentsKeepTheirRatesAndAreNotRescheduled) {
  FluidNetwork n = net({100, 100});
  const U u0 = {{0, 1.0}}, u1 = {{1, 1.0}};
  const FlowId c = n.add(0_ns, 1000, u1);
  const TimeNs before = n.finish(c);
  n.add(1_ns, 1000, u0);
  const FlowId b = n.add(2_ns, 1000, u0);
  for (FlowId id : n.rescheduled()) EXPECT_NE(id, c);
  EXPECT_EQ(n.finish(c), before);
  n.remove(3_ns, b);
  for (FlowId id : n.rescheduled()) EXPECT_NE(id, c);
}

TEST(Fluid, NonBindingLinkCarriesLoadButNeverLimits) {
  FluidNetwork n({10, 100}, {0, 1});
  const U u = {{0, 1.0}, {1, 1.0}};
  const FlowId a = n.add(0_ns, 1000, u);
  EXPECT_DOUBLE_EQ(n.rate(a), 100);
  EXPECT_DOUBLE_EQ(n.load(0), 100);
  n.remove(1_ns, a);
  EXPECT_EQ(n.load(0), 0);
  EXPECT_EQ(n.load(1), 0);
}

TEST(Fluid, FinishedFlowStopsTakingBandwidthAtTheNextSolve) {
  // A's fluid part ends at 1 s but its owner removes it later (latency). A
  // flow arriving in between gets the whole link.
  FluidNetwork n = net({100});
  const U u = {{0, 1.0}};
  const FlowId a = n.add(0_ns, 100, u);
  const FlowId b = n.add(TimeNs::from_seconds(1.5), 100, u);
  EXPECT_FALSE(n.attached(a));
  EXPECT_DOUBLE_EQ(n.rate(b), 100);
  EXPECT_EQ(n.finish(a), TimeNs::from_seconds(1.0));  // unchanged
  n.remove(TimeNs::from_seconds(2.0), a);
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
      const bool add = live.empty() || std::uniform_int_distribution<int>(0, 9)(rng) < 6;
      if (add) {
        U u;
        const int k = std::uniform_int_distribution<int>(1, 4)(rng);
        for (int i = 0; i < k; ++i) {
          const LinkId l = static_cast<LinkId>(std::uniform_int_distribution<int>(0, num_links - 1)(rng));
          if (std::any_of(u.begin(), u.end(), [&](const Usage& x) { return x.link == l; })) continue;
          u.push_back(Usage{l, std::uniform_real_distribution<double>(0.25, 4.0)(rng)});
        }
        storage.push_back(u);
        const FlowId id = n.add(0_ns, 1e12, storage.back());
        if (usage_of.size() <= id) usage_of.resize(id + 1, nullptr);
        usage_of[id] = &storage.back();
        live.push_back(id);
      } else {
        const size_t pick = std::uniform_int_distribution<size_t>(0, live.size() - 1)(rng);
        n.remove(0_ns, live[pick]);
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
  }
}

}  // namespace
}  // namespace lacuna::network
