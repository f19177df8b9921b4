// A cost model that times kernels with measured times from a calibration
// profile (KernelTable) and collectives / transfers with the profile's α–β
// fits where one matches (kind, group size, link), else with a base model
// (the analytic one). Pure, so safe for concurrent const calls.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "sim/calibration/kernel_table.h"
#include "sim/cost/cost_model.h"
#include "sim/proto/calibration.pb.h"
#include "sim/proto/scenario.pb.h"

namespace lacuna::calibration {

// Does the profile's device fit the cluster? A GPU profile needs
// cluster.gpu.name equal to the device name (case-insensitive; presets use
// CUDA names such as "NVIDIA H100 80GB HBM3"); a CPU profile needs the GPU
// name "cpu". Throws lacuna::Error naming both, suggesting
// --allow-device-mismatch, unless `allow_mismatch`. Returns true on a match.
bool check_device(const calib::CalibrationProfile& profile, const std::string& profile_path,
                  const scenario::Cluster& cluster, bool allow_mismatch);

// Were the kernels measured at the precision the scenario trains in? (A BF16
// GEMM time says little about FP8.) Same error and override as check_device.
bool check_precision(const calib::CalibrationProfile& profile, const std::string& profile_path,
                     scenario::Precision precision, bool allow_mismatch);

class CalibratedCostModel final : public cost::CostModel {
 public:
  // `profile` must be valid (read_profile validates). `base` times
  // communication the profile has no fit for. Checks the device
  // (check_device). `scenario` (optional) is the scenario being simulated,
  // named in the hint when the profile lacks a kernel class.
  CalibratedCostModel(calib::CalibrationProfile profile, std::string profile_path, const scenario::Cluster& cluster,
                      std::unique_ptr<const cost::CostModel> base, bool allow_device_mismatch,
                      const std::string& scenario = {});

  // "calibrated: <device> profile <file> (kernels), analytic collectives"
  std::string_view name() const override { return name_; }
  // Just the compute part, "calibrated kernels: <device> profile <file>", for
  // reports that describe communication separately (the flow network).
  const std::string& kernel_description() const { return kernels_name_; }
  std::string_view compute_name() const override { return kernels_name_; }

  TimeNs compute(const ir::Compute& op) const override { return table_.lookup(op).time; }
  TimeNs collective(ir::CollectiveKind kind, int64_t bytes, const cost::GroupShape& group) const override;
  TimeNs p2p(int64_t bytes, bool same_node) const override;

  const KernelTable& kernels() const { return table_; }
  const calib::CalibrationProfile& profile() const { return profile_; }
  const std::string& profile_path() const { return path_; }
  bool device_matches() const { return device_matches_; }

 private:
  // The link a group or transfer uses, as the profile names links.
  calib::LinkKind link_for(int32_t nodes) const;
  const calib::CollectiveFit* find_fit(ir::CollectiveKind kind, bool p2p, int32_t size, calib::LinkKind link) const;

  calib::CalibrationProfile profile_;
  std::string path_;
  KernelTable table_;
  std::unique_ptr<const cost::CostModel> base_;
  std::map<std::tuple<int, bool, int32_t, int>, calib::CollectiveFit> fits_;
  bool device_matches_ = true;
  std::string name_;
  std::string kernels_name_;
};

// Reads the profile (read_profile) and builds the model over `base`.
std::unique_ptr<CalibratedCostModel> make_calibrated_cost_model(const std::string& profile_path,
                                                                const scenario::Cluster& cluster,
                                                                std::unique_ptr<const cost::CostModel> base,
                                                                bool allow_device_mismatch,
                                                                const std::string& scenario = {});

}  // namespace lacuna::calibration
