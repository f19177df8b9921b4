// Roofline kernel time: a kernel is bound by either its FLOPs at the achieved
// fraction of peak or its HBM bytes at the achieved fraction of bandwidth, plus
// a fixed launch overhead (the floor of every kernel). Efficiencies come from
// GpuSpec.efficiency, keyed by the OpClass name with "DEFAULT" as the
// fallback; the FLOP efficiency is the class's at its best shape, times the
// per-shape factor of GpuSpec.shape_model (kernel_efficiency.h).
#pragma once

#include <array>

#include "sim/core/units.h"
#include "sim/cost/kernel_efficiency.h"
#include "sim/proto/program.pb.h"
#include "sim/proto/scenario.pb.h"

namespace lacuna::cost {

// Peak dense tensor FLOP/s of `gpu` at `precision`; lacuna::Error naming the
// field when it is not set. (Mirrors scenario::peak_flops_per_s so that the
// cost module does not depend on the scenario engine's implementation.)
double peak_flops_for(const scenario::GpuSpec& gpu, scenario::Precision precision);

// The peak an op's math runs at: its own precision (Compute.precision) where
// set, else the program's, FP8 meaning its BF16 base (an FP8 program is BF16
// training whose linear GEMMs run FP8 per op; docs/fp8.md).
scenario::Precision base_precision(scenario::Precision program);

class RooflineModel {
 public:
  // Throws lacuna::Error for a missing peak or HBM bandwidth, or an efficiency
  // outside (0, 1]. `precision` is the program's: ops without their own run at
  // base_precision(precision)'s peak; ops with one at that precision's peak,
  // with the class's efficiency (docs/fp8.md#gemm-efficiency).
  RooflineModel(const scenario::GpuSpec& gpu, scenario::Precision precision);

  // max(flops / (peak × eff.flops × shape factor), bytes / (hbm × eff.memory))
  // + overhead, rounded to the nearest nanosecond once, at the end. An op with
  // fixed_duration_ns > 0 takes exactly that. Throws lacuna::Error naming the
  // efficiency key when the op's class has no entry and there is no "DEFAULT".
  TimeNs time(const ir::Compute& op) const;

  // The achieved fraction of peak FLOP/s for `op`: eff.flops × shape factor.
  double flops_efficiency(const ir::Compute& op) const;
  const KernelEfficiency& shapes() const { return shapes_; }

 private:
  struct Resolved {
    bool has_flops = false;
    bool has_memory = false;
    double flops_per_s = 0;  // peak × efficiency (at the class's best shape)
    double bytes_per_s = 0;  // HBM bandwidth × efficiency
  };
  static constexpr int kClasses = ir::OpClass_ARRAYSIZE;
  std::array<Resolved, kClasses> by_class_{};
  // GEMMs whose math runs in FP8: efficiency key "GEMM_FP8" (a fraction of
  // the FP8 peak), measured lower than BF16's on Hopper
  // (docs/fp8.md#gemm-efficiency); unset: the GEMM class's.
  bool has_fp8_gemm_ = false;
  double fp8_gemm_flops_per_s_ = 0;  // base peak × efficiency: × ratio(op) gives FP8 FLOP/s
  const Resolved& resolved(const ir::Compute& op, double* flops_per_s) const;
  double overhead_s_ = 0;
  double peak_ = 0;
  // Peak of each precision relative to peak_ (0: the GPU has none; an op
  // asking for it is an error naming the field).
  std::array<double, scenario::Precision_ARRAYSIZE> peak_ratio_{};
  scenario::Precision base_ = scenario::BF16;
  double ratio(const ir::Compute& op) const;
  KernelEfficiency shapes_;
};

}  // namespace lacuna::cost
