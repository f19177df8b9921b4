// The `reliability` section (docs/goodput.md): known component kinds, every
// rate and time finite and in range.
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sim/scenario/checks.h"
#include "sim/scenario/reliability.h"

namespace lacuna::scenario {

const std::vector<std::string>& reliability_component_kinds() {
  static const std::vector<std::string> kinds{"gpu", "hbm", "nic", "network", "host", "software", "other"};
  return kinds;
}

void validate_reliability(const Scenario& spec, const Checker& c) {
  const Reliability& r = spec.reliability();
  const std::string p = "reliability.";
  // A recovery phase longer than a month, or a component failing more than
  // once an hour, is a typo, not a fleet.
  constexpr double kMaxPhaseS = 30 * 86400.0;
  const auto& kinds = reliability_component_kinds();
  for (const auto& [kind, k] : r.components()) {
    const std::string path = p + "components[" + kind + "]";
    if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end())
      c.fail(path, "unknown component kind \"" + kind + "\"", fmt::format("use one of {}", fmt::join(kinds, ", ")));
    if (k.has_rate_per_hour()) c.real(path + ".rate_per_hour", k.rate_per_hour(), 1.0, true);
    if (k.has_detection_s()) c.real(path + ".detection_s", k.detection_s(), kMaxPhaseS, true);
    if (k.has_diagnosis_s()) c.real(path + ".diagnosis_s", k.diagnosis_s(), kMaxPhaseS, true);
    if (k.has_replacement_s()) c.real(path + ".replacement_s", k.replacement_s(), kMaxPhaseS, true);
    if (k.has_relaunch_s()) c.real(path + ".relaunch_s", k.relaunch_s(), kMaxPhaseS, true);
  }
  if (r.has_checkpoint_interval_s())
    c.real(p + "checkpoint_interval_s", r.checkpoint_interval_s(), 365 * 86400.0, true);
  if (r.has_save_blocking_s()) c.real(p + "save_blocking_s", r.save_blocking_s(), kMaxPhaseS, true);
  if (r.has_storage_gb_per_s()) c.rate(p + "storage_gb_per_s", r.storage_gb_per_s(), 1e-3, 1e9, "GB/s");
  if (r.has_host_link_gb_per_s()) c.rate(p + "host_link_gb_per_s", r.host_link_gb_per_s(), 1e-3, 1e6, "GB/s");
}

}  // namespace lacuna::scenario
