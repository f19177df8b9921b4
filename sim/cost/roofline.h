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

class RooflineModel {
 public:
  // Throws lacuna::Error for a missing peak or HBM bandwidth, or an efficiency
  // outside (0, 1].
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
  double overhead_s_ = 0;
  double peak_ = 0;
  KernelEfficiency shapes_;
};

}  // namespace lacuna::cost
