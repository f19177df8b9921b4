// `lacuna validate` as a library (docs/validation.md): predicted against
// published, in three tables.
//  - nccl: collective micro-scenarios. Each row is a tiny program (one group,
//    one collective per rank, or one send/recv pair) simulated by the engine
//    with the chosen communication model; busbw = size × nccl-tests factor /
//    simulated time, against published nccl-tests figures.
//  - ptdp: PTD-P Table 1 (scenarios/validation/ptdp-*.pbtxt), TFLOP/s per GPU
//    counted with the paper's eq. 3 (ProgramInfo.hardware_flops_per_iteration
//    for full recompute) over the simulated iteration time.
//  - sar: SAR Table 5 (scenarios/validation/sar-*.pbtxt), iteration time.
// Each scenario's published figure is read from its `description`
// ("published: 137 TFLOP/s per GPU", "published: 1.42 s iteration").
// PTD-P and SAR run folded (one rank per class of identical ranks); rows come
// in a fixed order, so results are deterministic for any thread count.
// A calibration profile adds a third column to PTD-P and SAR: each row whose
// GPU and precision the profile was measured on, simulated with the
// profile's kernel times (planning included), with the share of kernel time
// the profile timed exactly.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/run/network_setup.h"
#include "sim/run/simulation_input.h"

namespace lacuna::run {

// One predicted-vs-published row. `lo`..`hi` is the published figure or
// range; the error is relative to the nearest end of the range (0 inside it).
struct ValidationRow {
  std::string name;
  std::string detail;     // GPUs, batch, collective, ...
  double predicted = 0;   // busbw GB/s, TFLOP/s per GPU, or seconds
  double lo = 0, hi = 0;  // published
  std::string published;  // as printed ("≈230", "365–370", "137")
  double iteration_s = 0;
  int64_t gpus = 0;
  int64_t batch = 0;
  // The same row under the kernel model before the fit to measured kernels
  // (scenario::best_case_kernel_model): the "before" column. Unset for the
  // collectives, which no kernel model times.
  std::optional<double> before;
  // With a profile: the row simulated with the profile's kernel times (unset
  // for a row on another GPU or precision), and the share of the job's
  // kernel time the profile timed exactly (not interpolated or extrapolated).
  std::optional<double> calibrated;
  double calibrated_exact_share = 0;
  std::string not_calibrated;  // "GPU, precision" of a row the profile does not apply to
  double error() const { return error_of(predicted); }
  double before_error() const { return before ? error_of(*before) : 0; }
  double calibrated_error() const { return calibrated ? error_of(*calibrated) : 0; }
  double error_of(double v) const;
};

struct ValidationTable {
  std::string key;    // nccl, ptdp, sar
  std::string title;  // printed heading
  std::string unit;
  std::vector<ValidationRow> rows;
  std::string simulated_with;  // the communication model description of the first row
  double mae() const;
  double mae_before() const;
  double bias() const;
  double bias_before() const;
  // Over the calibrated rows only; 0 when there are none.
  int calibrated_rows() const;
  double mae_calibrated() const;
  const ValidationRow* worst() const;
};

struct ValidationOptions {
  NetworkMode network = NetworkMode::kFlow;
  std::string only;       // "", "nccl", "ptdp" or "sar"
  std::string scenarios;  // the folder of ptdp-*.pbtxt and sar-*.pbtxt; empty: found (find_scenario_dir)
  int jobs = 0;           // rows simulated in parallel; 0: one per hardware thread
  CalibrationChoice calibration;
};

struct ValidationResult {
  std::vector<ValidationTable> tables;
  std::string calibration_measured_on;  // "\"<device>\", <precision>" with a profile; else empty
};

// Throws lacuna::Error before any run for a profile that fits none of a
// table's rows (naming its device and precision and the rows'), for a
// profile with the nccl table alone, and for a missing scenarios folder.
ValidationResult run_validation(const ValidationOptions& options);

}  // namespace lacuna::run
