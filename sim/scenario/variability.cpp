#include "sim/scenario/variability.h"

#include "sim/scenario/scenario.h"

namespace lacuna::scenario {

Variability resolve_variability(const Variability& user, const std::string& hardware_preset_name) {
  Variability out = user.ideal() ? Variability{} : variability_preset(hardware_preset_name);
  // MergeFrom respects the presence of optional scalars and merges nested
  // messages field by field; maps and repeated fields only exist in `user`.
  out.MergeFrom(user);
  if (!out.has_seed()) out.set_seed(0);
  return out;
}

bool any_kernel_noise(const Variability& v) {
  for (const auto& [name, n] : v.kernel_noise()) {
    if (n.cv() > 0 || n.tail_probability() > 0) return true;
  }
  return false;
}

bool any_host_pauses(const Variability& v) {
  return v.host_pauses().interval_iterations() > 0 && v.host_pauses().duration_ms() > 0;
}

bool any_link_flaps(const Variability& v) {
  return v.link_flaps().flaps_per_port_per_hour() > 0 && v.link_flaps().duration_s() > 0;
}

bool any_link_variability(const Variability& v) { return v.slow_links_size() > 0 || any_link_flaps(v); }

bool any_variability(const Variability& v) {
  return v.gpu_speed_cv() > 0 || any_kernel_noise(v) || v.stragglers().host_fraction() > 0 ||
         v.stragglers().hosts_size() > 0 || any_link_variability(v) || any_host_pauses(v) ||
         v.collective_launch_skew_us() > 0;
}

bool any_random_variability(const Variability& v) {
  return v.gpu_speed_cv() > 0 || any_kernel_noise(v) || v.stragglers().host_fraction() > 0 || any_link_flaps(v) ||
         any_host_pauses(v) || v.collective_launch_skew_us() > 0;
}

Variability program_variability(const Scenario& spec) {
  return any_variability(spec.variability()) ? spec.variability() : Variability{};
}

}  // namespace lacuna::scenario
