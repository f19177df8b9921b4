#include "sim/core/parallel_map.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

namespace lacuna {
namespace {

TEST(ParallelMap, ResultsInIndexOrderForAnyThreadCount) {
  for (int jobs : {1, 2, 3, 8, 100}) {
    const std::vector<size_t> out = parallel_map(50, jobs, [](size_t i) { return i * i; });
    ASSERT_EQ(out.size(), 50u);
    for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], i * i) << "jobs " << jobs;
  }
  EXPECT_TRUE(parallel_map(0, 4, [](size_t i) { return i; }).empty());
}

TEST(ParallelMap, UsesSeveralThreads) {
  std::mutex m;
  std::set<std::thread::id> ids;
  std::atomic<int> running{0};
  std::atomic<bool> overlapped{false};
  parallel_map(8, 2, [&](size_t) {
    if (++running > 1) overlapped = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    {
      std::lock_guard<std::mutex> lock(m);
      ids.insert(std::this_thread::get_id());
    }
    --running;
    return 0;
  });
  EXPECT_LE(ids.size(), 2u);
  EXPECT_GE(ids.size(), 1u);  // on a loaded machine one thread may take all
}

TEST(ParallelMap, RethrowsTheLowestFailingIndexAfterRunningEveryIndex) {
  for (int jobs : {1, 2, 4}) {
    std::atomic<int> calls{0};
    try {
      parallel_map(20, jobs, [&](size_t i) -> int {
        ++calls;
        if (i == 7 || i == 13) throw std::runtime_error("index " + std::to_string(i));
        return 0;
      });
      FAIL() << "expected an exception";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "index 7");
    }
    EXPECT_EQ(calls.load(), 20);
  }
}

TEST(ParallelMap, ResolveJobs) {
  EXPECT_EQ(resolve_jobs(3), 3);
  EXPECT_GE(resolve_jobs(0), 1);
}

}  // namespace
}  // namespace lacuna
