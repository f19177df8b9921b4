// One iteration's headline numbers (docs/metrics.md) and per-rank bubble and
// memory statistics, computed from the program and the bubble accounting.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/core/units.h"
#include "sim/proto/program.pb.h"
#include "sim/report/observers/bubble_accounting.h"
#include "sim/report/observers/comm_accounting.h"
#include "sim/report/analyses/critical_path.h"
#include "sim/report/analyses/fp8_breakdown.h"
#include "sim/report/analyses/link_summary.h"
#include "sim/report/observers/stragglers.h"
#include "sim/report/analyses/monte_carlo.h"
#include "sim/report/observers/timeline.h"

namespace lacuna::report {

// Over every rank of the job: a simulated rank counts once for each rank it
// stands for (fold mode), so the statistics are those of the full job.
// The median is the lower median (an actual rank's value).
struct Stats {
  int64_t min = 0;
  int64_t median = 0;
  int64_t max = 0;
  int32_t worst_rank = -1;  // simulated rank with the max (lowest rank on ties)
};

// Where a calibrated run's kernel times came from (`lacuna simulate
// --calibration`): distinct kernels (class, variant, shape) and kernel time
// summed over every rank of the job, by lookup kind, overall and per op class.
struct CalibrationCoverage {
  static constexpr int kKinds = 3;  // exact, interpolated, extrapolated
  struct Share {
    int64_t kernels = 0;
    int64_t time_ns = 0;
  };
  struct Row {
    std::string op_class;  // "GEMM", ...; empty for the total
    std::array<Share, kKinds> shares{};
    int64_t time_ns() const { return shares[0].time_ns + shares[1].time_ns + shares[2].time_ns; }
  };
  std::string profile;  // the profile file
  std::string device;   // the device it was measured on
  Row total;
  std::vector<Row> classes;  // in OpClass order
};

// What variability the run had (docs/variability.md), set by the caller; the
// reports leave the section out when unset (the ideal cluster).
struct VariabilitySummary {
  int64_t seed = 0;
  std::vector<std::string> sources;  // one line per source that was on
  int32_t straggler_hosts = 0;       // drawn or listed
  int32_t slowest_rank = 0;          // largest per-rank compute factor
  double slowest_factor = 1.0;
  uint64_t link_flaps = 0;           // begun during the run
};

struct Summary {
  std::string scenario_name;
  std::string cost_model;
  // ir::content_digest of the program that ran; set by the caller that
  // writes a timeline (empty: the JSON leaves `program_digest` out).
  std::string program_digest;
  ir::ProgramInfo info;
  int32_t num_gpus = 0;
  bool folded = false;
  int32_t simulated_ranks = 0;

  // One iteration: its time. Several (--iterations N > 1): the steady-state
  // mean, over iterations 1..N-1 (docs/metrics.md#iterations); the headline
  // metrics below are computed from it.
  TimeNs iteration_time;
  // Several iterations: N, each iteration's time (iteration k: the last end
  // of its ops minus iteration k - 1's), the run's end, and the time the
  // per-rank figures (ranks, bubbles, busy) are per: run time / N, since they
  // are the whole run's divided by N. One iteration: 1, {iteration_time},
  // iteration_time, iteration_time.
  int32_t iterations = 1;
  std::vector<TimeNs> iteration_times;
  TimeNs run_time;
  TimeNs rank_window;
  double tokens_per_s = 0;
  double tflops_per_gpu = 0;  // model FLOPs (no recompute) per second per GPU, / 1e12
  double mfu = 0;             // tflops_per_gpu · 1e12 / peak
  double hfu = 0;             // hardware FLOPs (with recompute) per second per GPU / peak

  std::vector<RankAccount> ranks;  // simulated ranks, in simulation order
  std::array<Stats, kNumBubbles> bubbles{};  // ns, indexed by Bubble
  Stats idle;                                // ns, all categories together
  Stats busy;                                // ns
  std::array<Stats, kNumPhases> busy_by_phase{};  // ns, indexed by ir::Phase
  Stats encoder_compute;                     // ns, compute ops with module > 0 (all compute streams)
  Stats peak_memory;                         // bytes
  Bytes memory_capacity;                     // 0: unknown
  int32_t over_capacity_ranks = 0;           // ranks of the job (represented ones included)

  // Network outputs, set by the caller after summarize() (unset: the reports
  // leave the sections out): achieved bandwidth per collective kind
  // (CommAccounting) and the busiest links (summarize_links / analytic_links).
  std::optional<CommSummary> comm;
  std::optional<LinkSummary> links;
  // Set by the caller for a calibrated run (unset: the reports leave it out).
  std::optional<CalibrationCoverage> calibration;
  // --critical-path and --stragglers (docs/critical-path.md); set by the
  // caller, unset: left out.
  std::optional<CriticalPathReport> critical_path;
  std::optional<StragglerSummary> stragglers;
  // The traced ranks' per-op timeline (the JSON `timeline` key, for `lacuna
  // diff`); set by the caller, unset: left out.
  std::optional<Timeline> timeline;
  // Monte Carlo samples (`--samples K`); set by the caller, unset: left out.
  std::optional<MonteCarlo> monte_carlo;
  std::optional<VariabilitySummary> variability;
  // FP8 programs: kernel time of FP8 / BF16 GEMMs, casts and amax work
  // (docs/fp8.md#breakdown); set by the caller, unset: left out.
  std::optional<Fp8Breakdown> fp8;

  // A multimodal program (ProgramInfo.modules non-empty): the reports add the
  // placement, the modules, encoder compute and the boundary / encoder-comm
  // bubble categories.
  bool multimodal() const { return info.modules_size() > 0; }
  // An MoE program (ProgramInfo.moe set): the reports add the moe_imbalance
  // and ep_exposed bubble categories (docs/moe.md#load-imbalance).
  bool moe() const { return info.has_moe(); }
  // Model FLOP/s per GPU over `peak_flops_per_gpu` (FP8 programs state MFU on
  // the dense BF16 and FP8 peaks, docs/fp8.md#mfu); 0 for an unknown peak.
  double mfu_on(double peak_flops_per_gpu) const {
    return peak_flops_per_gpu > 0 ? tflops_per_gpu * 1e12 / peak_flops_per_gpu : 0;
  }
};

// Throws InternalError (with the figures that produced it) for an MFU outside
// (0, 1] on the program's peak: every simulated run checks its summary before
// anything prints it (docs/reliability.md#hostile-inputs). Not summarize's own
// rule, so that report tests can summarize hand-made programs.
void check_mfu(const Summary& summary);

Summary summarize(const ir::Program& program, const BubbleAccounting& accounting, std::string cost_model,
                  bool folded);

// Throughput of `num_gpus` GPUs running the program's iteration in `t`:
// tokens/s, model TFLOP/s per GPU, MFU, HFU (docs/metrics.md); zeros for t = 0.
struct Throughput {
  double tokens_per_s = 0;
  double tflops_per_gpu = 0;
  double mfu = 0;
  double hfu = 0;
};
Throughput throughput(const ir::ProgramInfo& info, int32_t num_gpus, TimeNs t);

// Iteration k's time: ends[k] - ends[k - 1] (k = 0: ends[0]).
std::vector<TimeNs> iteration_times(const std::vector<TimeNs>& ends);
// The steady-state mean iteration time: of iterations 1..N-1 when N > 1 (the
// first starts from an idle cluster), the only one when N = 1; rounded to the
// ns. 0 for no iteration.
TimeNs steady_state_mean(const std::vector<TimeNs>& ends);

// Exposed for tests: statistics of (value, rank, weight) triples.
struct Sample {
  int64_t value;
  int32_t rank;
  int64_t weight;
};
Stats weighted_stats(std::vector<Sample> samples);

}  // namespace lacuna::report
