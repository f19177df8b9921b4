#include "calib/bench_driver.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <mutex>

#include <fmt/format.h>

#include "sim/core/error.h"

namespace lacuna::calibrate {

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void CollectingReporter::ReportRuns(const std::vector<Run>& runs) {
  std::string last;
  for (const Run& r : runs) {
    if (r.run_type != Run::RT_Iteration) continue;  // mean / median / stddev aggregates: ours are exact
    const std::string name = r.run_name.function_name;
    Times& t = times_[name];
    if (r.error_occurred) {
      if (t.error.empty()) t.error = r.error_message;
    } else {
      // Manual time, ns unit, one iteration: the time of that repetition's run.
      const double ns = r.iterations > 0 ? r.real_accumulated_time * 1e9 / static_cast<double>(r.iterations)
                                         : r.real_accumulated_time * 1e9;
      t.ns.push_back(ns);
    }
    last = name;
  }
  if (on_reported && !last.empty()) on_reported(last);
}

BenchResult CollectingReporter::result(const std::string& name) const {
  BenchResult out;
  const auto it = times_.find(name);
  if (it == times_.end()) {
    out.error = "no result was reported";
    return out;
  }
  const Times& t = it->second;
  if (!t.error.empty()) {
    out.error = t.error;
    return out;
  }
  if (t.ns.empty()) {
    out.error = "no repetition was timed";
    return out;
  }
  const auto clamp_ns = [](double ns) { return std::max<int64_t>(1, std::llround(ns)); };
  out.median_ns = clamp_ns(median(t.ns));
  out.min_ns = clamp_ns(*std::min_element(t.ns.begin(), t.ns.end()));
  out.max_ns = clamp_ns(*std::max_element(t.ns.begin(), t.ns.end()));
  out.repetitions = static_cast<int>(t.ns.size());
  return out;
}

namespace {

void initialize_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    // A synthetic argv: no user flags reach Google Benchmark.
    static char arg0[] = "lacuna-calibrate";
    static char* argv[] = {arg0, nullptr};
    int argc = 1;
    benchmark::Initialize(&argc, argv);
  });
}

struct PointState {
  const BenchPoint* point = nullptr;
  std::unique_ptr<kernels::KernelCase> kcase;
  int repetitions_done = 0;
  std::string error;
};

}  // namespace

std::vector<BenchResult> run_benchmarks(const std::vector<BenchPoint>& points, const DriverOptions& options) {
  if (options.repetitions < 1) throw Error("calibrate: --repetitions must be >= 1");
  if (options.warmup < 0) throw Error("calibrate: --warmup must be >= 0");
  initialize_once();
  benchmark::ClearRegisteredBenchmarks();

  std::vector<PointState> states(points.size());
  std::vector<std::string> names(points.size());
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < points.size(); ++i) {
    states[i].point = &points[i];
    names[i] = fmt::format("calib/{}", i);
    index[names[i]] = i;
    PointState* st = &states[i];
    const int reps = options.repetitions, warmup = options.warmup;
    Progress* progress = options.progress;
    benchmark::RegisterBenchmark(names[i].c_str(),
                                 [st, reps, warmup, progress](benchmark::State& state) {
                                   if (st->error.empty() && !st->kcase) {
                                     if (progress) progress->start(st->point->label);
                                     try {
                                       st->kcase = st->point->make();
                                       for (int w = 0; w < warmup; ++w) st->kcase->run_once_ns();
                                     } catch (const std::exception& e) {
                                       st->error = e.what();
                                       st->kcase.reset();
                                     }
                                   }
                                   if (!st->error.empty()) {
                                     state.SkipWithError(st->error.c_str());
                                     return;
                                   }
                                   for (auto _ : state) {
                                     double ns = 0;
                                     try {
                                       ns = st->kcase->run_once_ns();
                                     } catch (const std::exception& e) {
                                       st->error = e.what();
                                       state.SkipWithError(st->error.c_str());
                                       break;
                                     }
                                     state.SetIterationTime(std::max(ns, 0.0) * 1e-9);
                                   }
                                   if (++st->repetitions_done >= reps || !st->error.empty()) st->kcase.reset();
                                 })
        ->UseManualTime()
        ->Iterations(1)
        ->Repetitions(options.repetitions)
        ->Unit(benchmark::kNanosecond);
  }

  CollectingReporter reporter;
  reporter.on_reported = [&](const std::string& name) {
    const auto it = index.find(name);
    if (options.progress && it != index.end()) options.progress->done(points[it->second].weight);
  };
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::ClearRegisteredBenchmarks();

  std::vector<BenchResult> out(points.size());
  for (size_t i = 0; i < points.size(); ++i) {
    out[i] = reporter.result(names[i]);
    if (!states[i].error.empty()) {
      out[i] = BenchResult{};
      out[i].error = states[i].error;
    }
  }
  return out;
}

}  // namespace lacuna::calibrate
