// The Google Benchmark driver and its reporter, on fake cases with known
// times, and the progress line.
#include "calib/bench_driver.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "sim/core/error.h"

namespace lacuna::calibrate {
namespace {

// Returns the programmed times in order (cyclically) and counts its runs.
class FakeCase : public kernels::KernelCase {
 public:
  FakeCase(std::vector<double> times, int* runs) : times_(std::move(times)), runs_(runs) {}
  double run_once_ns() override {
    const double t = times_[static_cast<size_t>(*runs_) % times_.size()];
    ++*runs_;
    return t;
  }
  std::string describe() const override { return "fake"; }
  int64_t resident_bytes() const override { return 0; }

 private:
  std::vector<double> times_;
  int* runs_;
};

class ThrowingCase : public kernels::KernelCase {
 public:
  double run_once_ns() override { throw Error("the kernel exploded"); }
  std::string describe() const override { return "throwing"; }
  int64_t resident_bytes() const override { return 0; }
};

TEST(CalibBenchDriver, MedianOfOddAndEvenCounts) {
  EXPECT_EQ(median({5, 1, 3}), 3);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(median({}), 0);
}

TEST(CalibBenchDriver, ReporterGivesMedianMinMaxOfTheTimedRunsOnly) {
  int runs_a = 0, runs_b = 0;
  std::vector<BenchPoint> points(2);
  // Two warm-ups (1e9 ns each, never reported), then five timed runs.
  points[0].label = "a";
  points[0].make = [&] {
    return std::make_unique<FakeCase>(std::vector<double>{1e9, 1e9, 5000, 1000, 3000, 100000, 2000}, &runs_a);
  };
  points[1].label = "b";
  points[1].make = [&] { return std::make_unique<FakeCase>(std::vector<double>{7, 7, 40, 40, 40, 40, 40}, &runs_b); };
  DriverOptions o;
  o.repetitions = 5;
  o.warmup = 2;
  const auto r = run_benchmarks(points, o);
  ASSERT_EQ(r.size(), 2u);
  ASSERT_TRUE(r[0].ok()) << r[0].error;
  EXPECT_EQ(r[0].median_ns, 3000);
  EXPECT_EQ(r[0].min_ns, 1000);
  EXPECT_EQ(r[0].max_ns, 100000);
  EXPECT_EQ(r[0].repetitions, 5);
  EXPECT_EQ(runs_a, 7);  // 2 warm-up + 5 timed, the case built once
  ASSERT_TRUE(r[1].ok()) << r[1].error;
  EXPECT_EQ(r[1].median_ns, 40);
  EXPECT_EQ(r[1].min_ns, 40);
  EXPECT_EQ(r[1].max_ns, 40);
}

TEST(CalibBenchDriver, AFailingPointReportsItsErrorAndTheOthersStillRun) {
  int runs = 0;
  std::vector<BenchPoint> points(3);
  points[0].label = "throws in run";
  points[0].make = [] { return std::make_unique<ThrowingCase>(); };
  points[1].label = "throws in make";
  points[1].make = []() -> std::unique_ptr<kernels::KernelCase> { throw Error("no such kernel"); };
  points[2].label = "fine";
  points[2].make = [&] { return std::make_unique<FakeCase>(std::vector<double>{10}, &runs); };
  DriverOptions o;
  o.repetitions = 3;
  o.warmup = 0;
  const auto r = run_benchmarks(points, o);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_FALSE(r[0].ok());
  EXPECT_NE(r[0].error.find("exploded"), std::string::npos) << r[0].error;
  EXPECT_FALSE(r[1].ok());
  EXPECT_NE(r[1].error.find("no such kernel"), std::string::npos) << r[1].error;
  ASSERT_TRUE(r[2].ok());
  EXPECT_EQ(r[2].median_ns, 10);
  EXPECT_EQ(runs, 3);
}

TEST(CalibBenchDriver, ProgressPrintsAboutOneLinePerTenPercentWithoutATerminal) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  int runs = 0;
  std::vector<BenchPoint> points(40);
  for (auto& p : points) {
    p.label = "fake kernel";
    p.make = [&] { return std::make_unique<FakeCase>(std::vector<double>{1}, &runs); };
  }
  Progress progress(40, 0, f, false);
  DriverOptions o;
  o.repetitions = 1;
  o.warmup = 0;
  o.progress = &progress;
  run_benchmarks(points, o);
  progress.finish();
  std::rewind(f);
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  std::fclose(f);
  const auto lines = std::count(text.begin(), text.end(), '\n');
  EXPECT_GE(lines, 10);
  EXPECT_LE(lines, 12);
  EXPECT_EQ(text.find('\r'), std::string::npos);
  EXPECT_NE(text.find("[40/40] 100%"), std::string::npos) << text;
  EXPECT_EQ(progress.points_done(), 40);
}

TEST(CalibBenchDriver, DurationsFormat) {
  EXPECT_EQ(format_duration(65), "1:05");
  EXPECT_EQ(format_duration(3723), "1:02:03");
  EXPECT_EQ(format_duration(-1), "?");
}

}  // namespace
}  // namespace lacuna::calibrate
