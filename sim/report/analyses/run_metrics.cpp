#include "sim/report/analyses/run_metrics.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "sim/core/error.h"
#include "sim/report/formats/csv.h"

namespace lacuna::report {
namespace {

using Json = nlohmann::ordered_json;

RunMetrics::Spread spread(const Distribution& d) {
  RunMetrics::Spread s;
  s.mean = d.mean;
  for (const Quantile& q : d.quantiles) {
    if (q.percent == 50) s.p50 = q.value;
    if (q.percent == 90) s.p90 = q.value;
    if (q.percent == 99) s.p99 = q.value;
  }
  return s;
}

double ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }
double gb(int64_t bytes) { return static_cast<double>(bytes) / 1e9; }

Json spread_json(const RunMetrics::Spread& s) {
  return Json{{"mean", s.mean}, {"p50", s.p50}, {"p90", s.p90}, {"p99", s.p99}};
}
RunMetrics::Spread spread_of(const Json& j) {
  return {j.at("mean").get<double>(), j.at("p50").get<double>(), j.at("p90").get<double>(), j.at("p99").get<double>()};
}

}  // namespace

RunMetrics run_metrics(const Summary& s) {
  RunMetrics m;
  m.num_gpus = s.num_gpus;
  m.multimodal = s.multimodal();
  m.moe = s.moe();
  m.fp8 = s.info.has_fp8();
  m.iteration_time_ns = s.iteration_time.count();
  m.tokens_per_s = s.tokens_per_s;
  m.tflops_per_gpu = s.tflops_per_gpu;
  m.mfu = s.mfu;
  m.hfu = s.hfu;
  if (m.fp8) {
    m.mfu_bf16_peak = s.mfu_on(s.info.peak_bf16_flops_per_gpu());
  } else if (s.info.precision() == scenario::BF16) {
    m.mfu_bf16_peak = s.mfu;
  }
  m.peak_memory_bytes = s.peak_memory.max;
  m.peak_memory_rank = s.peak_memory.worst_rank;
  m.memory_capacity_bytes = s.memory_capacity.count();
  m.over_capacity_ranks = s.over_capacity_ranks;
  for (size_t b = 0; b < m.bubble_median_ns.size(); ++b) m.bubble_median_ns[b] = s.bubbles[b].median;
  m.bubble_total_median_ns = s.idle.median;
  m.busy_median_ns = s.busy.median;
  if (s.monte_carlo) {
    m.samples = s.monte_carlo->samples;
    m.iteration_s_samples = spread(s.monte_carlo->iteration_time);
    m.mfu_samples = spread(s.monte_carlo->mfu_distribution);
  }
  return m;
}

MetricSet metric_set(const RunMetrics& m) { return {m.multimodal, m.samples > 0, m.moe, m.fp8}; }
MetricSet operator|(MetricSet a, MetricSet b) {
  return {a.multimodal || b.multimodal, a.samples || b.samples, a.moe || b.moe, a.fp8 || b.fp8};
}

std::vector<Metric> named_metrics(const RunMetrics& m, MetricSet set) {
  std::vector<Metric> out = {
      {"num_gpus", static_cast<double>(m.num_gpus)},
      {"iteration_s", m.iteration_s()},
      {"tokens_per_s", m.tokens_per_s},
      {"tflops_per_gpu", m.tflops_per_gpu},
      {"mfu", m.mfu},
      {"hfu", m.hfu},
  };
  if (set.fp8) out.push_back({"mfu_bf16_peak", m.mfu_bf16_peak});
  const std::vector<Metric> memory = {
      {"peak_memory_gb", gb(m.peak_memory_bytes)},
      {"hbm_capacity_gb", gb(m.memory_capacity_bytes)},
      {"over_capacity_ranks", static_cast<double>(m.over_capacity_ranks)},
  };
  out.insert(out.end(), memory.begin(), memory.end());
  for (Bubble b : kAllBubbles) {
    if (!bubble_shown(b, set.multimodal, set.moe)) continue;
    out.push_back({"bubble_" + std::string(bubble_key(b)) + "_ms", ms(m.bubble_median_ns[static_cast<size_t>(b)])});
  }
  out.push_back({"bubble_total_ms", ms(m.bubble_total_median_ns)});
  out.push_back({"busy_ms", ms(m.busy_median_ns)});
  if (set.samples) {
    out.push_back({"samples", static_cast<double>(m.samples)});
    for (const auto& [prefix, s] :
         {std::pair{"iteration_s", &m.iteration_s_samples}, std::pair{"mfu", &m.mfu_samples}}) {
      const std::string p = prefix;
      out.push_back({p + "_mean", s->mean});
      out.push_back({p + "_p50", s->p50});
      out.push_back({p + "_p90", s->p90});
      out.push_back({p + "_p99", s->p99});
    }
  }
  return out;
}

std::vector<std::string> metric_names(MetricSet set) {
  std::vector<std::string> names;
  for (const Metric& m : named_metrics(RunMetrics{}, set)) names.push_back(m.name);
  return names;
}

std::string metrics_record(const RunMetrics& m) {
  Json j;
  j["num_gpus"] = m.num_gpus;
  j["multimodal"] = m.multimodal;
  // Dense records keep their form: the MoE flag and the two MoE categories
  // only where they occur.
  if (m.moe) j["moe"] = true;
  if (m.fp8) j["fp8"] = true;
  j["iteration_time_ns"] = m.iteration_time_ns;
  j["tokens_per_s"] = m.tokens_per_s;
  j["tflops_per_gpu"] = m.tflops_per_gpu;
  j["mfu"] = m.mfu;
  j["hfu"] = m.hfu;
  j["mfu_bf16_peak"] = m.mfu_bf16_peak;
  j["peak_memory_bytes"] = m.peak_memory_bytes;
  j["peak_memory_rank"] = m.peak_memory_rank;
  j["memory_capacity_bytes"] = m.memory_capacity_bytes;
  j["over_capacity_ranks"] = m.over_capacity_ranks;
  if (m.moe) {
    j["bubble_median_ns"] = m.bubble_median_ns;
  } else {
    j["bubble_median_ns"] = std::vector<int64_t>(m.bubble_median_ns.begin(), m.bubble_median_ns.begin() + kNumDenseBubbles);
  }
  j["bubble_total_median_ns"] = m.bubble_total_median_ns;
  j["busy_median_ns"] = m.busy_median_ns;
  j["samples"] = m.samples;
  if (m.samples > 0) {
    j["iteration_s_samples"] = spread_json(m.iteration_s_samples);
    j["mfu_samples"] = spread_json(m.mfu_samples);
  }
  return j.dump();
}

RunMetrics metrics_from_record(std::string_view record) {
  try {
    const Json j = Json::parse(record);
    RunMetrics m;
    m.num_gpus = j.at("num_gpus").get<int32_t>();
    m.multimodal = j.at("multimodal").get<bool>();
    m.iteration_time_ns = j.at("iteration_time_ns").get<int64_t>();
    m.tokens_per_s = j.at("tokens_per_s").get<double>();
    m.tflops_per_gpu = j.at("tflops_per_gpu").get<double>();
    m.mfu = j.at("mfu").get<double>();
    m.hfu = j.at("hfu").get<double>();
    m.mfu_bf16_peak = j.at("mfu_bf16_peak").get<double>();
    m.fp8 = j.contains("fp8") && j.at("fp8").get<bool>();
    m.peak_memory_bytes = j.at("peak_memory_bytes").get<int64_t>();
    m.peak_memory_rank = j.at("peak_memory_rank").get<int32_t>();
    m.memory_capacity_bytes = j.at("memory_capacity_bytes").get<int64_t>();
    m.over_capacity_ranks = j.at("over_capacity_ranks").get<int32_t>();
    m.moe = j.contains("moe") && j.at("moe").get<bool>();
    const auto bubbles = j.at("bubble_median_ns").get<std::vector<int64_t>>();
    if (bubbles.size() != static_cast<size_t>(m.moe ? kNumBubbles : kNumDenseBubbles)) {
      throw InternalError("a run's metrics record has " + std::to_string(bubbles.size()) + " bubble categories");
    }
    std::copy(bubbles.begin(), bubbles.end(), m.bubble_median_ns.begin());
    m.bubble_total_median_ns = j.at("bubble_total_median_ns").get<int64_t>();
    m.busy_median_ns = j.at("busy_median_ns").get<int64_t>();
    m.samples = j.at("samples").get<int32_t>();
    if (m.samples > 0) {
      m.iteration_s_samples = spread_of(j.at("iteration_s_samples"));
      m.mfu_samples = spread_of(j.at("mfu_samples"));
    }
    return m;
  } catch (const nlohmann::json::exception& e) {
    throw InternalError(std::string("a run's metrics record does not parse: ") + e.what());
  }
}

std::string summary_csv(const Summary& summary) {
  const RunMetrics m = run_metrics(summary);
  const std::vector<Metric> metrics = named_metrics(m, metric_set(m));
  std::vector<std::string> header = {"scenario", "cost_model", "mode"};
  std::vector<std::string> values = {summary.scenario_name, summary.cost_model, summary.folded ? "folded" : "full"};
  for (const Metric& metric : metrics) {
    header.push_back(metric.name);
    values.push_back(csv::number(metric.value));
  }
  return csv::row(header) + csv::row(values);
}

}  // namespace lacuna::report
