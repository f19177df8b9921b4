// Fitting the per-shape efficiency model (docs/cost-model.md) to measured
// kernel tables: the GEMM class efficiency and the K ramp's overhead, FP8
// GEMMs' efficiency, the attention efficiency and its per-block overhead,
// and one HBM efficiency per memory-bound class (a norm is not an add). The
// model's structure (tiles, waves, split-K, FlashAttention's blocks) is the
// preset's and is not fitted.
//
// Kernel level only: the data are kernel times, never an iteration time, an
// MFU or a validation row (docs/validation.md). Every prediction is the
// roofline's own (cost::RooflineModel on the row's compiled kernel,
// table_kernel.h), so a fitted parameter times a simulated kernel exactly as
// it timed the measured one.
//
// Objective: the sum over rows of ln(predicted / measured)², a relative
// error that weighs a 5 µs norm like a 5 ms GEMM. Each parameter is found by
// a golden-section search over a documented range (a grid first where the
// objective has two parameters); deterministic, independent of thread count.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sim/kernelfit/measured_table.h"
#include "sim/proto/scenario.pb.h"

namespace lacuna::kernelfit {

// The fitted parameters; unset ones keep the base GPU's value.
struct FitParams {
  std::optional<double> gemm_flops;             // efficiency["GEMM"].flops
  std::optional<double> gemm_k_overhead;        // shape_model.gemm_k_overhead
  std::optional<int64_t> gemm_max_split_k;      // shape_model.gemm_max_split_k
  std::optional<double> gemm_fp8_flops;         // efficiency["GEMM_FP8"].flops
  std::optional<double> attention_flops;        // efficiency["ATTENTION"].flops
  std::optional<double> attention_kv_overhead;  // shape_model.attention_kv_overhead
  std::map<ir::OpClass, double> memory;         // efficiency[class].memory
};

// `base` with `p` written over it.
scenario::GpuSpec apply(const scenario::GpuSpec& base, const FitParams& p);

// What the fit may change. The defaults fit everything the rows inform.
struct FitOptions {
  bool gemm = true;
  bool attention = true;
  bool memory = true;
  // Rows measured faster than this are scored but not fitted; < 0: ten times
  // the base GPU's kernel_overhead_us. lacuna's overhead is the GPU-side cost
  // of a kernel in a stream (its launch, ramp and tail, and the gap to the
  // next); a table holds kernel durations alone, without the gap, so where
  // the overhead is a large share of a kernel the efficiency would absorb
  // the difference. Above ten overheads it is under a tenth of the time.
  double min_fit_us = -1;
};

// Fits `p` to the rows with a time (rows without one are ignored). A class
// with no row keeps the base value. Throws lacuna::Error when a row cannot be
// timed under `base` (e.g. an fp8 row on a GPU without an FP8 peak).
FitParams fit(const scenario::GpuSpec& base, const std::vector<MeasuredKernel>& rows, const FitOptions& options = {});

// The roofline's time for one row under `gpu`, seconds.
double predict_s(const scenario::GpuSpec& gpu, const MeasuredKernel& row);

// One row scored: its measured time and the predictions before the fit (the
// base GPU), after it (fitted on every row) and held out (fitted on the rows
// of the other folds).
struct ScoredRow {
  const MeasuredKernel* row = nullptr;
  double measured_s = 0;
  double before_s = 0;
  double fitted_s = 0;
  double held_out_s = 0;
};

// Error statistics of one set of rows: relative error = predicted / measured − 1.
struct ErrorStats {
  int rows = 0;
  double mean_abs = 0;  // mean |error|
  double max_abs = 0;
  double bias = 0;      // mean error (+: predicted slower than measured)
};

struct FitReport {
  scenario::GpuSpec base;
  FitParams params;
  scenario::GpuSpec fitted;
  std::vector<ScoredRow> scored;  // the rows with a time, in input order
  // The folds of the cross-validation: the rows' groups when there are at
  // least 3 (leave one group out), else 5 folds by row order.
  std::vector<std::string> folds;
  bool folds_are_groups = false;
  double min_fit_us = 0;  // rows faster than this were scored, not fitted
};

// fit(), then cross-validation: each fold refitted without its rows and
// used to predict them.
FitReport fit_and_validate(const scenario::GpuSpec& base, const std::vector<MeasuredKernel>& rows,
                           const FitOptions& options = {});

// Statistics of the rows of `report` for which `keep` is true.
enum class Which { kBefore, kFitted, kHeldOut };
template <class Keep>
ErrorStats stats_of(const FitReport& report, Which which, Keep&& keep);
ErrorStats stats(const std::vector<double>& errors);
double error_of(const ScoredRow& r, Which which);

template <class Keep>
ErrorStats stats_of(const FitReport& report, Which which, Keep&& keep) {
  std::vector<double> e;
  for (const ScoredRow& r : report.scored)
    if (keep(*r.row)) e.push_back(error_of(r, which));
  return stats(e);
}

}  // namespace lacuna::kernelfit
