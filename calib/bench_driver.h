// Times KernelCases with Google Benchmark: each point is registered with
// benchmark::RegisterBenchmark as a manual-time benchmark of one iteration per
// repetition (state.SetIterationTime(case.run_once_ns() · 1e-9)), run
// `repetitions` times after `warmup` untimed runs; a BenchmarkReporter
// subclass collects every repetition and computes the median, minimum and
// maximum (Google Benchmark prints nothing). A point's case is built when its
// first repetition starts and freed after its last, so only one point's
// buffers are resident at a time.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "calib/progress.h"
#include "kernels/kernel_case.h"

namespace lacuna::calibrate {

struct BenchPoint {
  std::string label;  // shown in progress and errors
  std::function<std::unique_ptr<kernels::KernelCase>()> make;
  double weight = 0;  // estimated seconds, for the progress ETA
};

struct BenchResult {
  int64_t median_ns = 0;
  int64_t min_ns = 0;
  int64_t max_ns = 0;
  int repetitions = 0;  // timed runs collected
  std::string error;    // non-empty: the point failed (no times)
  bool ok() const { return error.empty() && repetitions > 0; }
};

struct DriverOptions {
  int repetitions = 10;
  int warmup = 3;
  Progress* progress = nullptr;  // optional
};

// Runs every point (in order) and returns one result per point. Exceptions
// from a case (make or run) become that point's error; other points still run.
std::vector<BenchResult> run_benchmarks(const std::vector<BenchPoint>& points, const DriverOptions& options);

// The median of `v` (mean of the two middle values for an even count); 0 for none.
double median(std::vector<double> v);

// Collects the per-repetition times of each benchmark by its registered name
// and ignores Google Benchmark's own aggregates.
class CollectingReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>& runs) override;

  // Called after each ReportRuns with the benchmark's name.
  std::function<void(const std::string&)> on_reported;

  struct Times {
    std::vector<double> ns;  // one per repetition
    std::string error;
  };
  const std::map<std::string, Times>& times() const { return times_; }
  BenchResult result(const std::string& name) const;

 private:
  std::map<std::string, Times> times_;
};

}  // namespace lacuna::calibrate
