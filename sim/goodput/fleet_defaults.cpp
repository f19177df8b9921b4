#include "sim/goodput/fleet_defaults.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace lacuna::goodput {
namespace {

// Llama 3's snapshot (Table 5), on 16,384 GPUs in 2,048 hosts for 54 days.
constexpr double kHours = 54 * 24.0;
constexpr double kGpuHours = 16384 * kHours;
constexpr double kHostHours = 2048 * kHours;

// Piecewise linear in log2(machines) through ByteRobust Table 7's points.
double table7(double machines, const std::array<double, 4>& seconds) {
  const double x = std::log2(std::max(1.0, machines) / 128.0);  // 0, 1, 2, 3 at the points
  if (x <= 0) return seconds[0];
  const int i = std::min(2, static_cast<int>(std::floor(x)));
  return std::max(seconds[0], seconds[static_cast<size_t>(i)] +
                                  (x - i) * (seconds[static_cast<size_t>(i) + 1] - seconds[static_cast<size_t>(i)]));
}

}  // namespace

double requeue_s(double machines) { return table7(machines, {454, 545, 635, 768}); }
double hot_update_s(double machines) { return table7(machines, {46, 51, 54, 65}); }

std::vector<ComponentKind> default_components(int64_t gpus, int64_t hosts, double load_s) {
  const double g = static_cast<double>(gpus), h = static_cast<double>(hosts);
  const double requeue = requeue_s(h), hot = hot_update_s(h);
  auto kind = [&](const char* name, double count, double failures, double hours, double detection,
                  double diagnosis, double replacement) {
    ComponentKind k;
    k.name = name;
    k.count = count;
    k.rate_per_hour = failures / hours;
    k.recovery.detection_s = detection;
    k.recovery.diagnosis_s = diagnosis;
    k.recovery.replacement_s = replacement;
    k.recovery.relaunch_s = 30;
    k.recovery.load_s = load_s;
    return k;
  };
  return {
      kind("gpu", g, 196, kGpuHours, 60, 93, requeue),
      kind("hbm", g, 72, kGpuHours, 60, 93, requeue),
      kind("nic", g, 7, kGpuHours, 60, 60, requeue),
      kind("network", g, 35, kGpuHours, 60, 60, requeue),
      kind("host", h, 46, kHostHours, 60, 109, requeue),
      kind("software", g, 56, kGpuHours, 60, 57, hot),
      kind("other", g, 7, kGpuHours, 600, 93, hot),
  };
}

}  // namespace lacuna::goodput
