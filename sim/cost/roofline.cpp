#include "sim/cost/roofline.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "sim/core/error.h"

namespace lacuna::cost {
namespace {

constexpr const char* kDefaultKey = "DEFAULT";
constexpr const char* kFp8GemmKey = "GEMM_FP8";


void check_fraction(bool present, double v, const std::string& path) {
  if (present && !(v > 0.0 && v <= 1.0)) {
    throw Error(field(path), "efficiency must be in (0, 1], got " + std::to_string(v),
                "achieved / peak, e.g. 0.8 for a GEMM reaching 80% of peak");
  }
}

}  // namespace

double peak_flops_for(const scenario::GpuSpec& gpu, scenario::Precision precision) {
  bool has = false;
  double tflops = 0;
  std::string name;
  switch (precision) {
    case scenario::BF16: has = gpu.has_peak_bf16_tflops(); tflops = gpu.peak_bf16_tflops(); name = "peak_bf16_tflops"; break;
    case scenario::FP16: has = gpu.has_peak_fp16_tflops(); tflops = gpu.peak_fp16_tflops(); name = "peak_fp16_tflops"; break;
    case scenario::FP8: has = gpu.has_peak_fp8_tflops(); tflops = gpu.peak_fp8_tflops(); name = "peak_fp8_tflops"; break;
    case scenario::FP32: has = gpu.has_peak_fp32_tflops(); tflops = gpu.peak_fp32_tflops(); name = "peak_fp32_tflops"; break;
    default:
      throw Error(field("training.precision"), "precision not set", "one of BF16, FP16, FP8, FP32");
  }
  if (!has) throw Error(field("cluster.gpu." + name), "not set", "dense tensor-core peak in TFLOP/s");
  if (!(tflops > 0) || !std::isfinite(tflops)) {
    throw Error(field("cluster.gpu." + name), "must be positive, got " + std::to_string(tflops));
  }
  return tflops * 1e12;
}

scenario::Precision base_precision(scenario::Precision program) {
  return program == scenario::FP8 ? scenario::BF16 : program;
}

RooflineModel::RooflineModel(const scenario::GpuSpec& gpu, scenario::Precision precision)
    : shapes_(gpu.shape_model(), gpu.num_sms()) {
  // The program's own peak must exist (FP8 on a GPU without FP8 fails here).
  const double program_peak = peak_flops_for(gpu, precision);
  base_ = base_precision(precision);
  const double peak = base_ == precision ? program_peak : peak_flops_for(gpu, base_);
  peak_ = peak;
  for (int p = 0; p < scenario::Precision_ARRAYSIZE; ++p) {
    if (!scenario::Precision_IsValid(p) || p == scenario::PRECISION_UNSPECIFIED) continue;
    try {
      peak_ratio_[static_cast<size_t>(p)] = peak_flops_for(gpu, static_cast<scenario::Precision>(p)) / peak;
    } catch (const Error&) {
      peak_ratio_[static_cast<size_t>(p)] = 0;  // asked for by an op: error in ratio()
    }
  }
  if (!gpu.has_hbm_bandwidth_gb_per_s() || !(gpu.hbm_bandwidth_gb_per_s() > 0)) {
    throw Error(field("cluster.gpu.hbm_bandwidth_gb_per_s"), "must be set and positive", "e.g. 3350 for H100 SXM");
  }
  const double hbm = gpu.hbm_bandwidth_gb_per_s() * 1e9;
  if (gpu.has_kernel_overhead_us()) {
    if (!(gpu.kernel_overhead_us() >= 0) || !std::isfinite(gpu.kernel_overhead_us())) {
      throw Error(field("cluster.gpu.kernel_overhead_us"), "must be non-negative");
    }
    overhead_s_ = gpu.kernel_overhead_us() * 1e-6;  // unset: no launch overhead
  }

  for (const auto& [key, eff] : gpu.efficiency()) {
    ir::OpClass unused;
    if (key != kDefaultKey && key != kFp8GemmKey && !ir::OpClass_Parse(key, &unused)) {
      throw Error(field("cluster.gpu.efficiency[" + key + "]"), "not an op class",
                  "use an OpClass name from program.proto (GEMM, ATTENTION, ...), GEMM_FP8 or DEFAULT");
    }
    check_fraction(eff.has_flops(), eff.flops(), "cluster.gpu.efficiency[" + key + "].flops");
    check_fraction(eff.has_memory(), eff.memory(), "cluster.gpu.efficiency[" + key + "].memory");
  }

  const auto& map = gpu.efficiency();
  const auto def = map.find(kDefaultKey);
  for (int c = 0; c < kClasses; ++c) {
    if (!ir::OpClass_IsValid(c)) continue;
    const auto own = map.find(ir::OpClass_Name(static_cast<ir::OpClass>(c)));
    // Field by field: the class's own value, else DEFAULT's.
    Resolved r;
    if (own != map.end() && own->second.has_flops()) {
      r.has_flops = true;
      r.flops_per_s = peak * own->second.flops();
    } else if (def != map.end() && def->second.has_flops()) {
      r.has_flops = true;
      r.flops_per_s = peak * def->second.flops();
    }
    if (own != map.end() && own->second.has_memory()) {
      r.has_memory = true;
      r.bytes_per_s = hbm * own->second.memory();
    } else if (def != map.end() && def->second.has_memory()) {
      r.has_memory = true;
      r.bytes_per_s = hbm * def->second.memory();
    }
    by_class_[c] = r;
  }
  const auto fp8 = map.find(kFp8GemmKey);
  if (fp8 != map.end() && fp8->second.has_flops()) {
    has_fp8_gemm_ = true;
    fp8_gemm_flops_per_s_ = peak * fp8->second.flops();
  }
}

// The class's resolved roofs; FP8 GEMMs take the GEMM_FP8 FLOP efficiency
// where the GPU has one (their bytes roof stays the GEMM class's).
const RooflineModel::Resolved& RooflineModel::resolved(const ir::Compute& op, double* flops_per_s) const {
  const Resolved& r = by_class_[static_cast<int>(op.op_class())];
  *flops_per_s = r.flops_per_s;
  if (has_fp8_gemm_ && op.op_class() == ir::GEMM && op.precision() == scenario::FP8) *flops_per_s = fp8_gemm_flops_per_s_;
  return r;
}

namespace {

void check_class(const ir::Compute& op) {
  const int c = static_cast<int>(op.op_class());
  if (c < 0 || c >= ir::OpClass_ARRAYSIZE || !ir::OpClass_IsValid(c)) {
    throw Error("compute op of unknown class " + std::to_string(c));
  }
}

}  // namespace

double RooflineModel::ratio(const ir::Compute& op) const {
  const scenario::Precision p = op.precision();
  if (p == scenario::PRECISION_UNSPECIFIED || p == base_) return 1.0;
  const int i = static_cast<int>(p);
  const double r = (i > 0 && i < scenario::Precision_ARRAYSIZE) ? peak_ratio_[static_cast<size_t>(i)] : 0.0;
  if (!(r > 0)) {
    throw Error(field("cluster.gpu"), "an op runs in " + scenario::Precision_Name(p) + " but the GPU has no peak for it",
                "set the GPU's peak for that precision");
  }
  return r;
}

double RooflineModel::flops_efficiency(const ir::Compute& op) const {
  check_class(op);
  double class_flops_per_s = 0;
  const Resolved& r = resolved(op, &class_flops_per_s);
  return r.has_flops ? class_flops_per_s / peak_ * shapes_.factor(op) : 0.0;
}

TimeNs RooflineModel::time(const ir::Compute& op) const {
  if (op.fixed_duration_ns() > 0) return TimeNs(op.fixed_duration_ns());
  check_class(op);
  double class_flops_per_s = 0;
  const Resolved& r = resolved(op, &class_flops_per_s);
  if (!r.has_flops || !r.has_memory) {
    const std::string& key = ir::OpClass_Name(op.op_class());
    throw Error(field("cluster.gpu.efficiency"),
                std::string("no ") + (r.has_flops ? "memory" : "flops") + " efficiency for \"" + key +
                    "\" and none under \"DEFAULT\"",
                "add efficiency { key: \"" + key + "\" value { flops: ... memory: ... } } or a DEFAULT entry");
  }
  if (!(op.flops() >= 0) || !(op.bytes() >= 0) || !std::isfinite(op.flops()) || !std::isfinite(op.bytes())) {
    throw Error("compute op with invalid work: flops " + std::to_string(op.flops()) + ", bytes " +
                std::to_string(op.bytes()));
  }
  // The shape factor only slows the FLOP roof: a badly tiled GEMM moves the
  // same bytes. It is exactly 1 for a flat model and for memory-bound classes,
  // so those times are the class roofline's to the bit.
  const double shape = op.flops() > 0 ? shapes_.factor(op) : 1.0;
  const double flops_per_s = op.flops() > 0 ? class_flops_per_s * ratio(op) : class_flops_per_s;
  const double seconds = std::max(op.flops() / (flops_per_s * shape), op.bytes() / r.bytes_per_s) + overhead_s_;
  return TimeNs::from_seconds(seconds);
}

}  // namespace lacuna::cost
