// The headline figures of one run, flat and named with their units: what
// `--csv` writes for `lacuna simulate` and `lacuna compare`, and what `lacuna
// sweep` carries from each point to the root (as a record) and writes as CSV,
// JSON and plots, so that all of them use one set of names and one set of
// numbers (docs/outputs.md#csv).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/report/observers/bubble_accounting.h"
#include "sim/report/analyses/summary.h"

namespace lacuna::report {

struct RunMetrics {
  int32_t num_gpus = 0;
  bool multimodal = false;
  bool moe = false;  // an MoE program: the moe_imbalance and ep_exposed bubbles
  bool fp8 = false;  // an FP8 program: mfu is on the FP8 peak, mfu_bf16_peak on the BF16 one
  int64_t iteration_time_ns = 0;
  double tokens_per_s = 0;
  double tflops_per_gpu = 0;
  double mfu = 0;
  double hfu = 0;
  // Model FLOP/s per GPU over the dense BF16 peak (docs/fp8.md#mfu): for an
  // FP8 program its second MFU, for a BF16 one its mfu, otherwise 0 (no
  // BF16 figure is compared).
  double mfu_bf16_peak = 0;
  int64_t peak_memory_bytes = 0;  // the highest rank's
  int32_t peak_memory_rank = -1;
  int64_t memory_capacity_bytes = 0;  // 0: unknown
  int32_t over_capacity_ranks = 0;
  std::array<int64_t, kNumBubbles> bubble_median_ns{};  // median over ranks, by category
  int64_t bubble_total_median_ns = 0;                   // median over ranks of all idle time
  int64_t busy_median_ns = 0;
  // Monte Carlo (--samples K): K (0: none) and the statistics of the K
  // samples' iteration time (s) and MFU.
  struct Spread {
    double mean = 0, p50 = 0, p90 = 0, p99 = 0;
  };
  int32_t samples = 0;
  Spread iteration_s_samples;
  Spread mfu_samples;

  double iteration_s() const { return static_cast<double>(iteration_time_ns) / 1e9; }
  bool fits() const { return over_capacity_ranks == 0; }
};

RunMetrics run_metrics(const Summary& summary);

// Which columns a table of runs has: the two multimodal bubble categories,
// and the sample statistics (--samples).
struct MetricSet {
  bool multimodal = false;
  bool samples = false;
  bool moe = false;  // the two MoE bubble categories
  bool fp8 = false;  // mfu_bf16_peak after hfu (a set with an FP8 run)
};
MetricSet metric_set(const RunMetrics& m);
// The union (a sweep whose points differ).
MetricSet operator|(MetricSet a, MetricSet b);

struct Metric {
  std::string name;  // with its unit: iteration_s, peak_memory_gb, bubble_tp_exposed_ms
  double value = 0;
};
// In column order: num_gpus, iteration_s, tokens_per_s, tflops_per_gpu, mfu,
// hfu, mfu_bf16_peak (an FP8 set only), peak_memory_gb, hbm_capacity_gb, over_capacity_ranks,
// bubble_<category>_ms (median per rank; the multimodal two only in a
// multimodal set), bubble_total_ms, busy_ms, then with samples: samples,
// iteration_s_{mean,p50,p90,p99}, mfu_{mean,p50,p90,p99}.
std::vector<Metric> named_metrics(const RunMetrics& m, MetricSet set);
std::vector<std::string> metric_names(MetricSet set);

// The metrics as one compact JSON object (a sweep point's record): integers
// as integers, doubles in their shortest round-trip form, so that
// metrics_from_record gives back exactly the same numbers on another process.
std::string metrics_record(const RunMetrics& m);
// Throws lacuna::InternalError for a record that metrics_record did not write.
RunMetrics metrics_from_record(std::string_view record);

// `lacuna simulate --csv`: a header and one row (scenario, cost model, mode,
// then named_metrics of the run).
std::string summary_csv(const Summary& summary);

}  // namespace lacuna::report
