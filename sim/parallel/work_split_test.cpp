#include "sim/parallel/work_split.h"

#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sim/core/error.h"

namespace lacuna::parallel {
namespace {

TEST(AssignItems, EqualCostsDealRoundRobin) {
  EXPECT_EQ(assign_items(5, 2, {}), (std::vector<int>{0, 1, 0, 1, 0}));
  EXPECT_EQ(assign_items(3, 1, {}), (std::vector<int>{0, 0, 0}));
}

TEST(AssignItems, LongestFirstBalancesTheLoad) {
  // One expensive item and many cheap ones: the expensive one alone on one
  // process, the cheap ones on the other.
  const std::vector<double> costs = {1, 1, 1, 10, 1, 1, 1, 1, 1, 1};
  const std::vector<int> owner = assign_items(costs.size(), 2, costs);
  EXPECT_EQ(owner[3], 0);
  for (size_t i = 0; i < costs.size(); ++i) {
    if (i != 3) {
      EXPECT_EQ(owner[i], 1) << i;
    }
  }
}

TEST(AssignItems, NoProcessCarriesMoreThanTheLptBound) {
  // Property over random costs: LPT's makespan is at most 4/3 of the optimum,
  // and the optimum is at least max(total / p, largest item).
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    const int processes = 1 + static_cast<int>(rng() % 6);
    const size_t n = 1 + rng() % 40;
    std::vector<double> costs(n);
    double total = 0, largest = 0;
    for (double& c : costs) {
      c = 0.1 + static_cast<double>(rng() % 1000) / 10.0;
      total += c;
      largest = std::max(largest, c);
    }
    const std::vector<int> owner = assign_items(n, processes, costs);
    std::vector<double> load(static_cast<size_t>(processes), 0);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_GE(owner[i], 0);
      ASSERT_LT(owner[i], processes);
      load[static_cast<size_t>(owner[i])] += costs[i];
    }
    const double lower = std::max(total / processes, largest);
    EXPECT_LE(*std::max_element(load.begin(), load.end()), 4.0 / 3.0 * lower + 1e-9) << trial;
  }
}

TEST(MapItems, RecordsComeBackInIndexOrderForAnyThreadCount) {
  auto item = [](size_t i) { return "item " + std::to_string(i * i); };
  const std::vector<std::string> one = map_items(World{}, 100, 1, item);
  ASSERT_EQ(one.size(), 100u);
  EXPECT_EQ(one[7], "item 49");
  for (int jobs : {2, 3, 8}) EXPECT_EQ(map_items(World{}, 100, jobs, item), one) << jobs;
}

TEST(MapItems, ProgressCountsEveryItemOnce) {
  std::map<size_t, int> seen;
  size_t last_done = 0;
  map_items(World{}, 20, 4, [](size_t i) { return std::to_string(i); }, {},
            [&](size_t done, size_t owned, size_t index, const std::string& record) {
              EXPECT_EQ(owned, 20u);
              EXPECT_EQ(done, last_done + 1);
              last_done = done;
              EXPECT_EQ(record, std::to_string(index));
              ++seen[index];
            });
  EXPECT_EQ(seen.size(), 20u);
  for (const auto& [index, count] : seen) EXPECT_EQ(count, 1) << index;
}

TEST(MapItems, TheLowestFailingItemIsReportedWhateverTheThreads) {
  auto item = [](size_t i) -> std::string {
    if (i == 13 || i == 31) throw Error("item " + std::to_string(i) + " failed");
    return "ok";
  };
  for (int jobs : {1, 4}) {
    try {
      map_items(World{}, 40, jobs, item);
      FAIL() << "no exception";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("item 13 failed"), std::string::npos) << e.what();
    }
  }
}

TEST(MapItems, NoItemsIsNoWork) { EXPECT_TRUE(map_items(World{}, 0, 4, [](size_t) { return std::string("x"); }).empty()); }

TEST(Processes, WithoutAnMpiSessionTheWorldIsOneProcess) {
  const World w = world();
  EXPECT_EQ(w.rank, 0);
  EXPECT_EQ(w.size, 1);
  EXPECT_TRUE(w.root());
}

}  // namespace
}  // namespace lacuna::parallel
