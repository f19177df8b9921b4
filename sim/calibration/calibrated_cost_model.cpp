#include "sim/calibration/calibrated_cost_model.h"

#include <algorithm>
#include <cctype>
#include <memory>

#include <fmt/format.h>

#include "sim/calibration/fit.h"
#include "sim/calibration/profile_io.h"
#include "sim/cost/kernel_efficiency.h"
#include "sim/core/error.h"

namespace lacuna::calibration {
namespace {

// The scenario GPU's per-shape factor, for the table's extrapolation; empty
// when the GPU has no shape terms (flat, or no tiles and no attention block).
ShapeFactor shape_factor_of(const scenario::Cluster& cluster) {
  auto e = std::make_shared<const cost::KernelEfficiency>(cluster.gpu().shape_model(), cluster.gpu().num_sms());
  if (!e->gemm_by_shape() && !e->attention_by_shape()) return {};
  return [e](const ir::Compute& op) { return e->factor(op); };
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

bool check_device(const calib::CalibrationProfile& profile, const std::string& profile_path,
                  const scenario::Cluster& cluster, bool allow_mismatch) {
  const std::string& gpu = cluster.gpu().name();
  const bool cpu = profile.device().kind() == calib::DeviceInfo::CPU;
  const bool match = cpu ? lower(gpu) == "cpu" : lower(gpu) == lower(profile.device().name());
  if (match || allow_mismatch) return match;
  const std::string measured =
      cpu ? fmt::format("the CPU \"{}\"", profile.device().name()) : fmt::format("\"{}\"", profile.device().name());
  throw Error(SourceLocation{profile_path, 0, 0, "device.name"},
              fmt::format("the profile was measured on {}, but the scenario's GPU (cluster.gpu.name) is \"{}\"",
                          measured, gpu),
              cpu ? "a CPU profile applies to a cluster whose gpu name is \"cpu\"; calibrate on the scenario's GPU, "
                    "or pass ‹allow-device-mismatch› to use these times anyway"
                  : "calibrate on the scenario's GPU, or pass ‹allow-device-mismatch› to use these times anyway");
}

bool check_precision(const calib::CalibrationProfile& profile, const std::string& profile_path,
                     scenario::Precision precision, bool allow_mismatch) {
  const bool match = profile.precision() == precision;
  if (match || allow_mismatch) return match;
  throw Error(SourceLocation{profile_path, 0, 0, "precision"},
              fmt::format("the profile's kernels were measured in {}, but the scenario trains in {} "
                          "(training.precision)",
                          scenario::Precision_Name(profile.precision()), scenario::Precision_Name(precision)),
              "calibrate at the scenario's precision, or pass ‹allow-device-mismatch› to use these times anyway");
}

CalibratedCostModel::CalibratedCostModel(calib::CalibrationProfile profile, std::string profile_path,
                                         const scenario::Cluster& cluster,
                                         std::unique_ptr<const cost::CostModel> base, bool allow_device_mismatch,
                                         const std::string& scenario)
    : profile_(std::move(profile)),
      path_(std::move(profile_path)),
      table_(profile_, path_, scenario, shape_factor_of(cluster)),
      base_(std::move(base)) {
  if (base_ == nullptr) throw Error("CalibratedCostModel needs a base model for communication");
  device_matches_ = check_device(profile_, path_, cluster, allow_device_mismatch);
  for (const calib::CollectiveFit& f : profile_.collectives()) {
    fits_.emplace(std::make_tuple(static_cast<int>(f.kind()), f.p2p(), f.group_size(), static_cast<int>(f.link())), f);
  }
  kernels_name_ = fmt::format("calibrated kernels: {} profile {}", profile_.device().name(), path_);
  name_ = fmt::format("calibrated: {} profile {} (kernels), {}", profile_.device().name(), path_,
                      fits_.empty() ? "analytic collectives"
                                    : "measured collectives where the profile has a fit, analytic otherwise");
  if (!device_matches_) {
    const std::string mismatch = fmt::format(" [device mismatch allowed: scenario GPU \"{}\"]", cluster.gpu().name());
    name_ += mismatch;
    kernels_name_ += mismatch;
  }
}

calib::LinkKind CalibratedCostModel::link_for(int32_t nodes) const {
  // CPU ranks share one process's memory; GPUs use NVLink inside a node and the network across nodes.
  if (profile_.device().kind() == calib::DeviceInfo::CPU) return calib::SHARED_MEMORY;
  return nodes <= 1 ? calib::NVLINK : calib::NETWORK;
}

const calib::CollectiveFit* CalibratedCostModel::find_fit(ir::CollectiveKind kind, bool p2p, int32_t size,
                                                          calib::LinkKind link) const {
  const auto it = fits_.find(std::make_tuple(static_cast<int>(kind), p2p, size, static_cast<int>(link)));
  return it == fits_.end() ? nullptr : &it->second;
}

TimeNs CalibratedCostModel::collective(ir::CollectiveKind kind, int64_t bytes, const cost::GroupShape& group) const {
  if (group.size <= 1 || bytes == 0) return TimeNs::zero();  // as the analytic model
  const calib::CollectiveFit* fit = find_fit(kind, false, group.size, link_for(group.nodes));
  if (fit == nullptr) return base_->collective(kind, bytes, group);
  const double ns = fit->latency_ns() + static_cast<double>(bytes) * bus_factor(kind, false, group.size) /
                                            fit->bus_bandwidth_bytes_per_s() * 1e9;
  return TimeNs(std::llround(ns));
}

TimeNs CalibratedCostModel::p2p(int64_t bytes, bool same_node) const {
  if (bytes == 0) return TimeNs::zero();
  const calib::CollectiveFit* fit = find_fit(ir::COLLECTIVE_UNSPECIFIED, true, 2, link_for(same_node ? 1 : 2));
  if (fit == nullptr) return base_->p2p(bytes, same_node);
  return TimeNs(std::llround(fit->latency_ns() + static_cast<double>(bytes) / fit->bus_bandwidth_bytes_per_s() * 1e9));
}

std::unique_ptr<CalibratedCostModel> make_calibrated_cost_model(const std::string& profile_path,
                                                                const scenario::Cluster& cluster,
                                                                std::unique_ptr<const cost::CostModel> base,
                                                                bool allow_device_mismatch, const std::string& scenario) {
  return std::make_unique<CalibratedCostModel>(read_profile(profile_path), profile_path, cluster, std::move(base),
                                               allow_device_mismatch, scenario);
}

}  // namespace lacuna::calibration
