#include "sim/report/summary.h"

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

Summary summarize(const ir::Program& program, const BubbleAccounting& accounting, std::string cost_model,
                  bool folded) {
  Summary s;
  s.info = program.info();
  s.scenario_name = s.info.scenario_name();
  s.cost_model = std::move(cost_model);
  s.num_gpus = program.ranks_size();
  s.folded = folded;
  s.simulated_ranks = static_cast<int32_t>(accounting.ranks().size());
  s.iteration_time = accounting.iteration_time();
  s.ranks = accounting.ranks();
  s.memory_capacity = accounting.capacity();

  const double t = s.iteration_time.seconds();
  const double n = static_cast<double>(s.num_gpus);
  const double peak = s.info.peak_flops_per_gpu();
  if (t > 0 && n > 0) {
    s.tokens_per_s = static_cast<double>(s.info.tokens_per_iteration()) / t;
    const double model_per_gpu = s.info.model_flops_per_iteration() / (t * n);
    const double hardware_per_gpu = s.info.hardware_flops_per_iteration() / (t * n);
    s.tflops_per_gpu = model_per_gpu / 1e12;
    if (peak > 0) {
      s.mfu = model_per_gpu / peak;
      s.hfu = hardware_per_gpu / peak;
    }
  }

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
