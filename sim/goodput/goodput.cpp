#include "sim/goodput/goodput.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>
#include <limits>

#include <fmt/format.h>

#include "sim/core/counter_rng.h"
#include "sim/core/distributions.h"
#include "sim/core/error.h"

namespace lacuna::goodput {

const char* recovery_phase_name(int phase) {
  static constexpr const char* kNames[kNumRecoveryPhases] = {"detection", "diagnosis", "replacement", "relaunch",
                                                             "load"};
  return phase >= 0 && phase < kNumRecoveryPhases ? kNames[phase] : "?";
}

double TimeBreakdown::total_s() const {
  double t = productive_s + recomputed_s + checkpoint_s;
  for (double r : recovery_s) t += r;
  return t;
}

double failure_rate_per_s(const std::vector<ComponentKind>& components) {
  double per_hour = 0;
  for (const ComponentKind& c : components) per_hour += c.count * c.rate_per_hour;
  return per_hour / 3600.0;
}

namespace {

void require(bool ok, const std::string& path, const std::string& what) {
  if (!ok) throw Error(field(path), what, "");
}

bool finite_nonnegative(double x) { return std::isfinite(x) && x >= 0; }

void check(const GoodputInputs& in) {
  require(std::isfinite(in.work_s) && in.work_s > 0, "work_s",
          fmt::format("the job needs a positive, finite amount of work, not {} s", in.work_s));
  require(in.runs >= 1 && in.runs <= 1'000'000, "runs",
          fmt::format("from 1 to 1,000,000 runs (the confidence interval narrows as 1/√runs), not {}", in.runs));
  const CheckpointPlan& c = in.checkpoint;
  require(finite_nonnegative(c.interval_s), "checkpoint.interval_s", "a checkpoint interval is finite and >= 0");
  require(finite_nonnegative(c.save_blocking_s), "checkpoint.save_blocking_s", "a save's time is finite and >= 0");
  require(finite_nonnegative(c.upload_s), "checkpoint.upload_s", "an upload's time is finite and >= 0");
  for (const ComponentKind& k : in.components) {
    const std::string at = "reliability." + k.name;
    require(finite_nonnegative(k.count), at + ".count", "a component count is finite and >= 0");
    require(finite_nonnegative(k.rate_per_hour), at + ".rate_per_hour", "a failure rate is finite and >= 0");
    const RecoveryPhases& r = k.recovery;
    for (double t : {r.detection_s, r.diagnosis_s, r.replacement_s, r.relaunch_s, r.load_s})
      require(finite_nonnegative(t), at + ".recovery", "a recovery phase's time is finite and >= 0");
  }
  // Each failure is an event of the run: bound them, so that a run ends in
  // this process's life (10^6 failures per run is already centuries of a
  // 10,000-GPU job).
  const double expected_failures = failure_rate_per_s(in.components) * in.work_s;
  require(expected_failures <= 1e6, "work_s",
          fmt::format("the run would expect {:.3g} failures; lacuna simulates up to 10^6 per run", expected_failures));
  // Without checkpoints every failure restarts the job from the beginning:
  // with a rate high enough against the work, the expected wall time is
  // astronomically long. Refuse what would not end in this process's life.
  const double lambda = failure_rate_per_s(in.components);
  const double span = c.interval_s > 0 ? std::min(in.work_s, c.interval_s + c.save_blocking_s + c.upload_s) : in.work_s;
  require(lambda * span < 50, "checkpoint.interval_s",
          fmt::format("with {:.3g} failures per hour and {:.3g} s of running between durable checkpoints, the "
                      "job would expect e^{:.0f} restarts before one stretch completes",
                      lambda * 3600, span, lambda * span));
}

// One run; `out` accumulates its breakdown, `lost` and `failures` per kind.
struct RunTally {
  TimeBreakdown time;
  std::vector<double> lost_by_component_s;
  std::vector<double> failures_by_component;
  double failures = 0;
};

RunTally one_run(const GoodputInputs& in, uint32_t run, double lambda, const std::vector<double>& cumulative) {
  RunTally t;
  t.lost_by_component_s.assign(in.components.size(), 0);
  t.failures_by_component.assign(in.components.size(), 0);
  const CheckpointPlan& c = in.checkpoint;
  const bool checkpoints = c.interval_s > 0;
  double progress = 0;     // work done since the start, kept or not
  double durable = 0;      // progress the last durable checkpoint holds
  double running = 0;      // running time since the start (computing or saving; recoveries excluded)
  // The checkpoint uploading, if any: (progress, running time at which it
  // becomes durable). A save waits for it (below), so there is at most one.
  std::optional<std::pair<double, double>> upload;
  auto promote = [&]() {
    if (upload && running >= upload->second) {
      durable = upload->first;
      upload.reset();
    }
  };
  double next_failure = lambda > 0 ? exponential(uniform(RngKey{in.seed, RngPurpose::kFailureArrival, run, 0, 0, 0}),
                                                 1.0 / lambda)
                                   : std::numeric_limits<double>::infinity();
  uint32_t failure_index = 0;
  // The next save at this much progress.
  auto next_save = [&]() {
    return checkpoints ? (std::floor(progress / c.interval_s + 1e-12) + 1) * c.interval_s
                       : std::numeric_limits<double>::infinity();
  };
  double save_at = next_save();
  double saving_left = 0;  // of the save in progress
  while (progress < in.work_s || saving_left > 0) {
    // Promote an uploaded checkpoint.
    promote();
    // What ends first: the computing stretch or the save, an upload, a failure.
    double step;
    if (saving_left > 0) {
      step = saving_left;
    } else {
      step = std::min(in.work_s, save_at) - progress;
    }
    if (upload) step = std::min(step, upload->second - running);
    if (running + step >= next_failure) {
      // A failure: the time up to it is spent, then the recovery.
      const double spent = next_failure - running;
      if (saving_left > 0) {
        saving_left -= spent;
        t.time.checkpoint_s += spent;
      } else {
        progress += spent;
      }
      running = next_failure;
      promote();
      const double u = uniform(RngKey{in.seed, RngPurpose::kFailureCause, run, 0, failure_index, 0});
      const size_t kind = static_cast<size_t>(
          std::upper_bound(cumulative.begin(), cumulative.end(), u * cumulative.back()) - cumulative.begin());
      const size_t ki = std::min(kind, in.components.size() - 1);
      const ComponentKind& k = in.components[ki];
      const RecoveryPhases& r = k.recovery;
      const double phases[kNumRecoveryPhases] = {r.detection_s, r.diagnosis_s, r.replacement_s, r.relaunch_s,
                                                 r.load_s};
      for (int p = 0; p < kNumRecoveryPhases; ++p) t.time.recovery_s[p] += phases[p];
      const double lost = progress - durable;
      t.time.recomputed_s += lost;
      t.lost_by_component_s[ki] += lost + r.total_s();
      t.failures_by_component[ki] += 1;
      t.failures += 1;
      progress = durable;
      upload.reset();  // an upload in flight is lost with the job
      saving_left = 0;
      save_at = next_save();
      ++failure_index;
      next_failure = running + exponential(uniform(RngKey{in.seed, RngPurpose::kFailureArrival, run, 0,
                                                          failure_index, 0}),
                                           1.0 / lambda);
      continue;
    }
    running += step;
    if (saving_left > 0) {
      saving_left -= step;
      t.time.checkpoint_s += step;
      if (saving_left <= 0) {
        saving_left = 0;
        // The copy is out: durable once uploaded.
        if (c.upload_s > 0) {
          upload.emplace(progress, running + c.upload_s);
        } else {
          durable = progress;
        }
        save_at = next_save();
      }
      continue;
    }
    progress += step;
    if (progress >= in.work_s) break;
    if (progress >= save_at) {
      progress = save_at;  // exact, against rounding
      // The storage takes one upload at a time: a save due while the last
      // one still uploads waits for it, and the wait blocks the job.
      const double wait = upload ? std::max(0.0, upload->second - running) : 0.0;
      if (wait + c.save_blocking_s > 0) {
        saving_left = wait + c.save_blocking_s;
      } else if (c.upload_s > 0) {
        upload.emplace(progress, running + c.upload_s);
        save_at = next_save();
      } else {
        durable = progress;
        save_at = next_save();
      }
    }
  }
  t.time.productive_s = in.work_s;
  return t;
}

}  // namespace

GoodputResult simulate_goodput(const GoodputInputs& in) {
  check(in);
  const double lambda = failure_rate_per_s(in.components);
  std::vector<double> cumulative;
  double sum = 0;
  for (const ComponentKind& k : in.components) cumulative.push_back(sum += k.count * k.rate_per_hour);
  GoodputResult out;
  out.runs = in.runs;
  out.lost_by_component_s.assign(in.components.size(), 0);
  out.failures_by_component.assign(in.components.size(), 0);
  double ettr_sum = 0, ettr_sq = 0, wall_sum = 0, wall_sq = 0;
  for (int32_t i = 0; i < in.runs; ++i) {
    const RunTally t = one_run(in, static_cast<uint32_t>(i), lambda, cumulative);
    const double wall = t.time.total_s();
    const double ettr = in.work_s / wall;
    ettr_sum += ettr;
    ettr_sq += ettr * ettr;
    wall_sum += wall;
    wall_sq += wall * wall;
    out.failures_mean += t.failures;
    out.mean.recomputed_s += t.time.recomputed_s;
    out.mean.checkpoint_s += t.time.checkpoint_s;
    for (int p = 0; p < kNumRecoveryPhases; ++p) out.mean.recovery_s[p] += t.time.recovery_s[p];
    for (size_t k = 0; k < in.components.size(); ++k) {
      out.lost_by_component_s[k] += t.lost_by_component_s[k];
      out.failures_by_component[k] += t.failures_by_component[k];
    }
  }
  const double n = in.runs;
  auto sd = [n](double s, double sq) { return n > 1 ? std::sqrt(std::max(0.0, (sq - s * s / n) / (n - 1))) : 0.0; };
  out.ettr_mean = ettr_sum / n;
  out.ettr_sd = sd(ettr_sum, ettr_sq);
  out.ettr_ci95 = 1.96 * out.ettr_sd / std::sqrt(n);
  out.wall_mean_s = wall_sum / n;
  out.wall_ci95_s = 1.96 * sd(wall_sum, wall_sq) / std::sqrt(n);
  out.failures_mean /= n;
  out.mean.productive_s = in.work_s;
  out.mean.recomputed_s /= n;
  out.mean.checkpoint_s /= n;
  for (double& r : out.mean.recovery_s) r /= n;
  for (double& x : out.lost_by_component_s) x /= n;
  for (double& x : out.failures_by_component) x /= n;
  return out;
}

double expected_stretch_s(double rate_per_s, double restart_s, double stretch_s) {
  if (rate_per_s <= 0) return stretch_s;
  return (1.0 / rate_per_s + restart_s) * std::expm1(rate_per_s * stretch_s);
}

double expected_wall_s(double rate_per_s, double restart_s, double work_s, double interval_s, double save_s) {
  if (interval_s <= 0 || interval_s >= work_s) return expected_stretch_s(rate_per_s, restart_s, work_s);
  const double k = std::floor(work_s / interval_s);
  const double r = work_s - k * interval_s;
  // A save at the very end is not taken: with r = 0 the last stretch is τ.
  if (r <= 0)
    return (k - 1) * expected_stretch_s(rate_per_s, restart_s, interval_s + save_s) +
           expected_stretch_s(rate_per_s, restart_s, interval_s);
  return k * expected_stretch_s(rate_per_s, restart_s, interval_s + save_s) +
         expected_stretch_s(rate_per_s, restart_s, r);
}

double young_interval_s(double save_s, double mtbf_s) { return std::sqrt(2.0 * save_s * mtbf_s); }

double daly_interval_s(double save_s, double mtbf_s) {
  if (save_s >= 2.0 * mtbf_s) return mtbf_s;
  const double x = save_s / (2.0 * mtbf_s);
  return std::sqrt(2.0 * save_s * mtbf_s) * (1.0 + std::sqrt(x) / 3.0 + x / 9.0) - save_s;
}

}  // namespace lacuna::goodput
