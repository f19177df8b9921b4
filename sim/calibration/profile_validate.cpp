// validate_profile: what calibration.proto cannot express. The first problem
// found is thrown, located at the offending field's line.
#include <cmath>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "sim/calibration/profile_io.h"
#include "sim/core/error.h"

namespace lacuna::calibration {
namespace {

class Checker {
 public:
  explicit Checker(const scenario::SourceMap& m) : m_(m) {}
  [[noreturn]] void fail(const std::string& path, const std::string& what, const std::string& fix = {}) const {
    throw Error(m_.locate(path), what, fix);
  }

 private:
  const scenario::SourceMap& m_;
};

std::string shape_text(const google::protobuf::RepeatedField<int64_t>& shape) {
  std::string s = "[";
  for (int i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string num(double v) { return fmt::format("{}", v); }

void check_point(const Checker& c, const calib::Measurement& p, const std::string& at) {
  if (p.shape().empty()) c.fail(at + ".shape", "must not be empty", "the kernel's ir::Compute.shape");
  // The first dimension is size-like (tokens, elements, GEMM m) and must be
  // positive; later ones may be 0 where they are flags (attention's causal).
  if (p.shape(0) <= 0) {
    c.fail(at + ".shape[0]", "must be > 0, got " + std::to_string(p.shape(0)),
           "the first dimension is the kernel's size (tokens, elements, batch, parameters or GEMM m)");
  }
  for (int k = 1; k < p.shape_size(); ++k) {
    if (p.shape(k) < 0) c.fail(at + ".shape[" + std::to_string(k) + "]", "must be ≥ 0, got " + std::to_string(p.shape(k)));
  }
  if (p.time_ns() <= 0) c.fail(at + ".time_ns", "must be > 0, got " + std::to_string(p.time_ns()));
  if (p.min_ns() <= 0) c.fail(at + ".min_ns", "must be > 0, got " + std::to_string(p.min_ns()));
  if (p.max_ns() <= 0) c.fail(at + ".max_ns", "must be > 0, got " + std::to_string(p.max_ns()));
  if (p.min_ns() > p.time_ns()) {
    c.fail(at + ".min_ns", fmt::format("min_ns {} exceeds the median time_ns {}", p.min_ns(), p.time_ns()),
           "need min_ns ≤ time_ns ≤ max_ns");
  }
  if (p.max_ns() < p.time_ns()) {
    c.fail(at + ".max_ns", fmt::format("max_ns {} is below the median time_ns {}", p.max_ns(), p.time_ns()),
           "need min_ns ≤ time_ns ≤ max_ns");
  }
  if (p.repetitions() <= 0) c.fail(at + ".repetitions", "must be > 0, got " + std::to_string(p.repetitions()));
  if (!(p.flops() >= 0) || !std::isfinite(p.flops())) c.fail(at + ".flops", "must be finite and ≥ 0, got " + num(p.flops()));
  if (!(p.bytes() >= 0) || !std::isfinite(p.bytes())) c.fail(at + ".bytes", "must be finite and ≥ 0, got " + num(p.bytes()));
}

void check_fit(const Checker& c, const calib::RooflineFit& f, const std::string& at) {
  const auto rate = [&](double v, const std::string& name) {
    if (!(v >= 0) || !std::isfinite(v)) c.fail(at + "." + name, "must be finite and ≥ 0, got " + num(v));
  };
  rate(f.flops_per_s(), "flops_per_s");
  rate(f.bytes_per_s(), "bytes_per_s");
  if (f.flops_per_s() == 0 && f.bytes_per_s() == 0) {
    c.fail(at, "flops_per_s and bytes_per_s are both 0: the fit cannot time shapes outside the grid",
           "fit the table with calibration::fit_roofline");
  }
  if (!(f.overhead_ns() >= 0) || !std::isfinite(f.overhead_ns())) {
    c.fail(at + ".overhead_ns", "must be finite and ≥ 0, got " + num(f.overhead_ns()));
  }
  if (!(f.rms_relative_error() >= 0) || !std::isfinite(f.rms_relative_error())) {
    c.fail(at + ".rms_relative_error", "must be finite and ≥ 0, got " + num(f.rms_relative_error()));
  }
}

void check_table(const Checker& c, const calib::OpTable& t, const std::string& at) {
  if (t.op_class() == ir::OP_CLASS_UNSPECIFIED || !ir::OpClass_IsValid(t.op_class())) {
    c.fail(at + ".op_class", "is not set", "an ir::OpClass name such as GEMM");
  }
  if (!ir::KernelVariant_IsValid(t.variant())) c.fail(at + ".variant", "has no value " + std::to_string(t.variant()));
  if (t.points().empty()) c.fail(at + ".points", "a table needs at least one measurement");
  std::map<std::vector<int64_t>, int> seen;
  for (int j = 0; j < t.points_size(); ++j) {
    const std::string pat = at + ".points[" + std::to_string(j) + "]";
    check_point(c, t.points(j), pat);
    const std::vector<int64_t> shape(t.points(j).shape().begin(), t.points(j).shape().end());
    if (auto [it, fresh] = seen.emplace(shape, j); !fresh) {
      c.fail(pat + ".shape",
             fmt::format("duplicate shape {} for {} {} (also at points[{}])", shape_text(t.points(j).shape()),
                         ir::OpClass_Name(t.op_class()), ir::KernelVariant_Name(t.variant()), it->second),
             "each (op class, variant, shape) is measured once");
    }
  }
  if (!t.has_fit()) c.fail(at + ".fit", "is missing", "fit the table with calibration::fit_roofline");
  check_fit(c, t.fit(), at + ".fit");
}

void check_collective(const Checker& c, const calib::CollectiveFit& f, const std::string& at) {
  if (f.p2p()) {
    if (f.kind() != ir::COLLECTIVE_UNSPECIFIED) c.fail(at + ".kind", "must be unset for a send/receive fit (p2p: true)");
  } else if (f.kind() == ir::COLLECTIVE_UNSPECIFIED || !ir::CollectiveKind_IsValid(f.kind())) {
    c.fail(at + ".kind", "is not set", "a collective kind such as ALL_REDUCE, or p2p: true for send/receive");
  }
  if (f.group_size() < 2) c.fail(at + ".group_size", "must be ≥ 2, got " + std::to_string(f.group_size()));
  if (f.link() == calib::LINK_UNSPECIFIED || !calib::LinkKind_IsValid(f.link())) {
    c.fail(at + ".link", "is not set", "NVLINK, PCIE, NETWORK or SHARED_MEMORY");
  }
  if (!(f.latency_ns() >= 0) || !std::isfinite(f.latency_ns())) {
    c.fail(at + ".latency_ns", "must be finite and ≥ 0, got " + num(f.latency_ns()));
  }
  if (!(f.bus_bandwidth_bytes_per_s() > 0) || !std::isfinite(f.bus_bandwidth_bytes_per_s())) {
    c.fail(at + ".bus_bandwidth_bytes_per_s", "must be finite and > 0, got " + num(f.bus_bandwidth_bytes_per_s()));
  }
  for (int j = 0; j < f.points_size(); ++j) {
    const auto& p = f.points(j);
    const std::string pat = at + ".points[" + std::to_string(j) + "]";
    if (p.bytes() <= 0) c.fail(pat + ".bytes", "must be > 0, got " + std::to_string(p.bytes()));
    if (p.time_ns() <= 0) c.fail(pat + ".time_ns", "must be > 0, got " + std::to_string(p.time_ns()));
  }
}

}  // namespace

void validate_profile(const calib::CalibrationProfile& profile, const scenario::SourceMap& locations) {
  const Checker c(locations);
  if (profile.format_version() != 1) {
    c.fail("format_version", "must be 1, got " + std::to_string(profile.format_version()),
           "this lacuna reads format 1; write the profile with `lacuna calibrate` of this version");
  }
  if (!profile.has_device()) c.fail("device", "is missing", "the device the profile was measured on");
  if (profile.device().kind() == calib::DeviceInfo::KIND_UNSPECIFIED ||
      !calib::DeviceInfo::Kind_IsValid(profile.device().kind())) {
    c.fail("device.kind", "is not set", "CPU or GPU");
  }
  if (profile.device().name().empty()) {
    c.fail("device.name", "must not be empty", "the CUDA device name (e.g. \"NVIDIA H100 80GB HBM3\") or the CPU model");
  }
  if (!scenario::Precision_IsValid(profile.precision())) {
    c.fail("precision", "has no value " + std::to_string(profile.precision()));
  }
  std::map<std::pair<int, int>, int> tables;
  for (int i = 0; i < profile.ops_size(); ++i) {
    const std::string at = "ops[" + std::to_string(i) + "]";
    const auto& t = profile.ops(i);
    check_table(c, t, at);
    if (auto [it, fresh] = tables.emplace(std::make_pair(int(t.op_class()), int(t.variant())), i); !fresh) {
      c.fail(at, fmt::format("a second table for {} {} (the first is ops[{}])", ir::OpClass_Name(t.op_class()),
                             ir::KernelVariant_Name(t.variant()), it->second),
             "merge the measurements into one table");
    }
  }
  std::set<std::tuple<int, bool, int, int>> fits;
  for (int i = 0; i < profile.collectives_size(); ++i) {
    const std::string at = "collectives[" + std::to_string(i) + "]";
    const auto& f = profile.collectives(i);
    check_collective(c, f, at);
    if (!fits.emplace(int(f.kind()), f.p2p(), f.group_size(), int(f.link())).second) {
      c.fail(at, "a second fit for the same kind, group size and link", "keep one fit per (kind, group_size, link)");
    }
  }
}

}  // namespace lacuna::calibration
