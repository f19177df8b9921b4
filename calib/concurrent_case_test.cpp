#include "calib/concurrent_case.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "sim/core/error.h"

namespace lacuna::calibrate {
namespace {

using ::testing::HasSubstr;

// Counts its runs (shared by all copies) and can be made to fail.
class CountingCase : public kernels::KernelCase {
 public:
  CountingCase(std::atomic<int>& runs, bool fail) : runs_(runs), fail_(fail) {}
  double run_once_ns() override {
    if (fail_) throw Error("the kernel exploded");
    runs_.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    return 50'000;
  }
  std::string describe() const override { return "counting case"; }
  int64_t resident_bytes() const override { return 100; }

 private:
  std::atomic<int>& runs_;
  bool fail_;
};

TEST(ConcurrentCase, OneIsThePlainCase) {
  std::atomic<int> runs{0}, made{0};
  auto c = make_concurrent_case(
      [&] {
        ++made;
        return std::make_unique<CountingCase>(runs, false);
      },
      1);
  EXPECT_EQ(made.load(), 1);
  EXPECT_EQ(c->describe(), "counting case");
  EXPECT_EQ(c->run_once_ns(), 50'000);
}

TEST(ConcurrentCase, CopiesRunInTheBackgroundUntilDestroyed) {
  std::atomic<int> runs{0}, made{0};
  {
    auto c = make_concurrent_case(
        [&] {
          ++made;
          return std::make_unique<CountingCase>(runs, false);
        },
        3);
    EXPECT_EQ(made.load(), 3);
    EXPECT_THAT(c->describe(), HasSubstr("with 2 concurrent copies"));
    EXPECT_EQ(c->resident_bytes(), 300);
    // The background copies run while the timed one is idle.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (runs.load() < 10 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    EXPECT_GE(runs.load(), 10);
    EXPECT_EQ(c->run_once_ns(), 50'000);
  }
  // Joined: no copy runs any more.
  const int after = runs.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(runs.load(), after);
}

TEST(ConcurrentCase, AFailingCopyIsReportedByTheNextRun) {
  std::atomic<int> runs{0};
  int made = 0;
  auto c = make_concurrent_case([&] { return std::make_unique<CountingCase>(runs, made++ > 0); }, 2);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    try {
      c->run_once_ns();
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("a concurrent copy of counting case failed: the kernel exploded"));
      break;
    }
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the failure was never reported";
  }
}

TEST(ConcurrentCase, BelowOneIsAnError) {
  std::atomic<int> runs{0};
  EXPECT_THROW(make_concurrent_case([&] { return std::make_unique<CountingCase>(runs, false); }, 0), Error);
}

}  // namespace
}  // namespace lacuna::calibrate
