#include "sim/report/analyses/monte_carlo.h"

#include <cmath>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/report/formats/format.h"
#include "sim/report/formats/json_util.h"
#include "sim/report/analyses/summary.h"

namespace lacuna::report {
namespace {

using json_util::Json;
using json_util::secs;

// A point mass: every statistic is v, every interval [v, v] (exact).
void make_exact(Distribution& d) {
  d.mean_ci = Interval{d.mean, d.mean};
  for (Quantile& q : d.quantiles) {
    q.ci = Interval{q.value, q.value};
    q.ci_low_rank = 1;
    q.ci_high_rank = d.count;
    q.coverage = 1.0;
  }
}

Json interval(const std::optional<Interval>& i) {
  if (!i) return nullptr;
  return Json::array({i->low, i->high});
}

Json distribution_json(const Distribution& d) {
  Json j;
  j["mean"] = d.mean;
  j["mean_ci"] = interval(d.mean_ci);
  j["stddev"] = d.stddev;
  j["min"] = d.min;
  j["max"] = d.max;
  for (const Quantile& q : d.quantiles) {
    const std::string key = fmt::format("p{}", q.percent);
    j[key] = q.value;
    j[key + "_ci"] = interval(q.ci);
    j[key + "_ci_ranks"] = q.ci ? Json::array({q.ci_low_rank, q.ci_high_rank}) : Json(nullptr);
    j[key + "_ci_coverage"] = q.ci ? Json(q.coverage) : Json(nullptr);
  }
  return j;
}

std::string seconds_text(double s) { return format_duration(TimeNs(static_cast<int64_t>(std::llround(s * 1e9)))); }

// "1.957 s [1.950 s, 1.964 s]"; without an interval "1.957 s [n/a: needs ≥ 367 samples]".
template <class F>
std::string with_ci(double value, const std::optional<Interval>& ci, F text, const std::string& missing) {
  if (!ci) return fmt::format("{} [{}]", text(value), missing);
  return fmt::format("{} [{}, {}]", text(value), text(ci->low), text(ci->high));
}

// Fewest samples that give the two-sided interval of the `percent` quantile.
int32_t samples_needed(int32_t percent) {
  for (int32_t k = 1; k < 100000; ++k) {
    if (quantile_rank_interval(percent, k).low > 0) return k;
  }
  return 100000;
}

}  // namespace

MonteCarlo summarize_samples(std::vector<SampleOutcome> outcomes, int32_t samples, uint64_t seed, bool identical,
                             const ir::ProgramInfo& info, int32_t num_gpus) {
  if (samples < 1) throw Error(SourceLocation{{}, 0, 0, "‹samples›"}, "must be at least 1, got " + std::to_string(samples));
  if (outcomes.empty() || (!identical && static_cast<int32_t>(outcomes.size()) != samples) ||
      (identical && outcomes.size() != 1)) {
    throw InternalError("internal: " + std::to_string(outcomes.size()) + " sample outcomes for " + std::to_string(samples) +
                " samples");
  }
  MonteCarlo mc;
  mc.samples = samples;
  mc.seed = seed;
  mc.identical = identical;
  mc.iterations = static_cast<int32_t>(outcomes[0].iteration_ends.size());
  if (identical) {
    for (int32_t i = 1; i < samples; ++i) {
      SampleOutcome copy = outcomes[0];
      copy.seed = sample_seed(seed, static_cast<uint64_t>(i));
      outcomes.push_back(std::move(copy));
    }
  }
  mc.per_sample = std::move(outcomes);
  for (const SampleOutcome& o : mc.per_sample) {
    const TimeNs t = steady_state_mean(o.iteration_ends);
    mc.iteration_time_s.push_back(secs(t));
    mc.mfu.push_back(throughput(info, num_gpus, t).mfu);
  }
  mc.iteration_time = describe(mc.iteration_time_s);
  mc.mfu_distribution = describe(mc.mfu);
  if (identical) {
    make_exact(mc.iteration_time);
    make_exact(mc.mfu_distribution);
  }
  return mc;
}

std::string monte_carlo_json(const MonteCarlo& mc) {
  Json j;
  j["samples"] = mc.samples;
  j["seed"] = mc.seed;
  j["sample_seeds"] = "seed + i";
  j["iterations"] = mc.iterations;
  j["identical"] = mc.identical;
  j["confidence"] = kConfidence;
  j["iteration_time_s"] = distribution_json(mc.iteration_time);
  j["mfu"] = distribution_json(mc.mfu_distribution);
  Json per = Json::object();
  Json seeds = Json::array();
  for (const SampleOutcome& o : mc.per_sample) seeds.push_back(o.seed);
  per["seed"] = std::move(seeds);
  per["iteration_time_s"] = mc.iteration_time_s;
  per["mfu"] = mc.mfu;
  if (mc.iterations > 1) {
    Json times = Json::array();
    for (const SampleOutcome& o : mc.per_sample) {
      Json row = Json::array();
      for (TimeNs t : iteration_times(o.iteration_ends)) row.push_back(secs(t));
      times.push_back(std::move(row));
    }
    per["iteration_times_s"] = std::move(times);
  }
  j["per_sample"] = std::move(per);
  return j.dump();
}

std::string format_monte_carlo(const MonteCarlo& mc) {
  std::string out = "\n";
  const std::string label = pad_right("samples", 24);
  if (mc.identical) {
    out += fmt::format("  {} {} (seed {}): no variability in this run, so every sample equals it (simulated once)\n",
                       label, mc.samples, mc.seed);
    return out;
  }
  out += fmt::format("  {} {} (sample i: seed {} + i){}; 95 % confidence intervals\n", label, mc.samples, mc.seed,
                     mc.iterations > 1 ? fmt::format(", each the steady-state mean of {} iterations", mc.iterations)
                                       : std::string());
  out += fmt::format("    {} {} {}\n", pad_right("", 8), pad_right("iteration time", 40), "MFU");
  const auto pct = [](double v) { return format_percent(v); };
  auto line = [&](const std::string& name, double t, const std::optional<Interval>& t_ci, double m,
                  const std::optional<Interval>& m_ci, const std::string& missing) {
    out += fmt::format("    {} {} {}\n", pad_right(name, 8), pad_right(with_ci(t, t_ci, seconds_text, missing), 40),
                       with_ci(m, m_ci, pct, missing));
  };
  line("mean", mc.iteration_time.mean, mc.iteration_time.mean_ci, mc.mfu_distribution.mean,
       mc.mfu_distribution.mean_ci, "n/a: needs ≥ 2 samples");
  for (size_t q = 0; q < mc.iteration_time.quantiles.size(); ++q) {
    const Quantile& t = mc.iteration_time.quantiles[q];
    const Quantile& m = mc.mfu_distribution.quantiles[q];
    line(fmt::format("p{}", t.percent), t.value, t.ci, m.value, m.ci,
         fmt::format("n/a: needs ≥ {} samples", samples_needed(t.percent)));
  }
  out += fmt::format("    {} {} · min {} · max {}\n", pad_right("spread", 8),
                     fmt::format("stddev {}", seconds_text(mc.iteration_time.stddev)),
                     seconds_text(mc.iteration_time.min), seconds_text(mc.iteration_time.max));
  return out;
}

}  // namespace lacuna::report
