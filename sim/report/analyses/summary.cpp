#include "sim/report/analyses/summary.h"

#include <fmt/format.h>

#include "sim/core/error.h"

#include <algorithm>

namespace lacuna::report {

Stats weighted_stats(std::vector<Sample> samples) {
  Stats s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end(), [](const Sample& a, const Sample& b) {
    return a.value != b.value ? a.value < b.value : a.rank < b.rank;
  });
  s.min = samples.front().value;
  s.max = samples.back().value;
  // Lowest rank among those with the max value.
  s.worst_rank = std::find_if(samples.begin(), samples.end(), [&](const Sample& x) { return x.value == s.max; })->rank;
  int64_t total = 0;
  for (const Sample& x : samples) total += x.weight;
  const int64_t threshold = (total + 1) / 2;  // lower median
  int64_t seen = 0;
  for (const Sample& x : samples) {
    seen += x.weight;
    if (seen >= threshold) {
      s.median = x.value;
      break;
    }
  }
  return s;
}

namespace {

template <class F>
Stats stats_of(const std::vector<RankAccount>& ranks, F value) {
  std::vector<Sample> samples;
  samples.reserve(ranks.size());
  for (const RankAccount& r : ranks) {
    samples.push_back({value(r), r.rank, static_cast<int64_t>(std::max<size_t>(1, r.represents.size()))});
  }
  return weighted_stats(std::move(samples));
}

}  // namespace

Throughput throughput(const ir::ProgramInfo& info, int32_t num_gpus, TimeNs iteration) {
  Throughput out;
  const double t = iteration.seconds();
  const double n = static_cast<double>(num_gpus);
  const double peak = info.peak_flops_per_gpu();
  if (t > 0 && n > 0) {
    out.tokens_per_s = static_cast<double>(info.tokens_per_iteration()) / t;
    const double model_per_gpu = info.model_flops_per_iteration() / (t * n);
    const double hardware_per_gpu = info.hardware_flops_per_iteration() / (t * n);
    out.tflops_per_gpu = model_per_gpu / 1e12;
    if (peak > 0) {
      out.mfu = model_per_gpu / peak;
      out.hfu = hardware_per_gpu / peak;
    }
  }
  return out;
}

std::vector<TimeNs> iteration_times(const std::vector<TimeNs>& ends) {
  std::vector<TimeNs> out;
  out.reserve(ends.size());
  for (size_t k = 0; k < ends.size(); ++k) out.push_back(ends[k] - (k == 0 ? TimeNs(0) : ends[k - 1]));
  return out;
}

TimeNs steady_state_mean(const std::vector<TimeNs>& ends) {
  if (ends.empty()) return TimeNs::zero();
  if (ends.size() == 1) return ends[0];
  const int64_t span = (ends.back() - ends.front()).count();
  const auto n = static_cast<int64_t>(ends.size() - 1);
  return TimeNs((span + n / 2) / n);
}

namespace {

// Per-iteration means of a run of `n` iterations, rounded to the ns.
TimeNs per_iteration(TimeNs total, int32_t n) { return TimeNs((total.count() + n / 2) / n); }

void divide(RankAccount& r, int32_t n) {
  r.busy = per_iteration(r.busy, n);
  for (TimeNs& t : r.busy_by_phase) t = per_iteration(t, n);
  for (TimeNs& t : r.bubbles) t = per_iteration(t, n);
  r.encoder_compute = per_iteration(r.encoder_compute, n);
}

}  // namespace

void check_mfu(const Summary& s) {
  // The model's FLOPs in less time than the peak allows cannot be: an MFU
  // outside (0, 1] is a defect of lacuna's (the scenario checks bound the
  // fields that could produce one, docs/reliability.md), never a figure.
  if (s.info.peak_flops_per_gpu() > 0 && s.info.model_flops_per_iteration() > 0 && s.iteration_time > TimeNs::zero() &&
      !(s.mfu > 0 && s.mfu <= 1))
    throw InternalError(fmt::format(
        "MFU {} outside (0, 1] for scenario \"{}\": {:.6g} model FLOPs per iteration in {} ns on {} GPUs of "
        "{:.6g} FLOP/s peak each",
        s.mfu, s.scenario_name, s.info.model_flops_per_iteration(), s.iteration_time.count(), s.num_gpus,
        s.info.peak_flops_per_gpu()));
}

Summary summarize(const ir::Program& program, const BubbleAccounting& accounting, std::string cost_model,
                  bool folded) {
  Summary s;
  s.info = program.info();
  s.scenario_name = s.info.scenario_name();
  s.cost_model = std::move(cost_model);
  s.num_gpus = program.ranks_size();
  s.folded = folded;
  s.simulated_ranks = static_cast<int32_t>(accounting.ranks().size());
  s.run_time = accounting.iteration_time();
  s.ranks = accounting.ranks();
  s.memory_capacity = accounting.capacity();
  s.iterations = accounting.iterations();
  if (s.iterations > 1) {
    s.iteration_times = iteration_times(accounting.iteration_ends());
    s.iteration_time = steady_state_mean(accounting.iteration_ends());
    s.rank_window = per_iteration(s.run_time, s.iterations);
    for (RankAccount& r : s.ranks) divide(r, s.iterations);
  } else {
    s.iteration_time = s.run_time;
    s.iteration_times = {s.run_time};
    s.rank_window = s.run_time;
  }

  const Throughput tp = throughput(s.info, s.num_gpus, s.iteration_time);
  s.tokens_per_s = tp.tokens_per_s;
  s.tflops_per_gpu = tp.tflops_per_gpu;
  s.mfu = tp.mfu;
  s.hfu = tp.hfu;

  for (Bubble b : kAllBubbles) {
    s.bubbles[static_cast<int>(b)] = stats_of(s.ranks, [b](const RankAccount& r) { return r.bubble(b).count(); });
  }
  s.idle = stats_of(s.ranks, [](const RankAccount& r) { return r.idle().count(); });
  s.busy = stats_of(s.ranks, [](const RankAccount& r) { return r.busy.count(); });
  for (size_t p = 0; p < s.busy_by_phase.size(); ++p) {
    s.busy_by_phase[p] = stats_of(s.ranks, [p](const RankAccount& r) { return r.busy_by_phase[p].count(); });
  }
  s.encoder_compute = stats_of(s.ranks, [](const RankAccount& r) { return r.encoder_compute.count(); });
  s.peak_memory = stats_of(s.ranks, [](const RankAccount& r) { return r.peak_memory.count(); });
  for (const RankAccount& r : s.ranks) {
    if (r.over_capacity) s.over_capacity_ranks += static_cast<int32_t>(std::max<size_t>(1, r.represents.size()));
  }
  return s;
}

}  // namespace lacuna::report
