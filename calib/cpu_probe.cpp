#include "calib/cpu_probe.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "kernels/cpu_case.h"

namespace lacuna::calibrate {

CpuSpeed probe_cpu_speed() {
  using clock = std::chrono::steady_clock;
  CpuSpeed s;
  {
    constexpr int64_t n = 256;
    std::vector<float> a(n * n, 0.75f), b(n * n, -1.25f), c(n * n);
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      const auto t0 = clock::now();
      kernels::blocked_gemm(a, b, {n, n, n, false, false}, c);
      best = std::min(best, std::chrono::duration<double>(clock::now() - t0).count());
    }
    s.flops_per_s = 2.0 * n * n * n / std::max(best, 1e-9);
  }
  {
    constexpr size_t bytes = size_t{64} << 20;
    std::vector<char> src(bytes, 1), dst(bytes, 0);
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      const auto t0 = clock::now();
      std::memcpy(dst.data(), src.data(), bytes);
      best = std::min(best, std::chrono::duration<double>(clock::now() - t0).count());
      src[static_cast<size_t>(rep)] = dst[bytes - 1];  // keep the copy observable
    }
    s.bytes_per_s = 2.0 * static_cast<double>(bytes) / std::max(best, 1e-9);
  }
  return s;
}

}  // namespace lacuna::calibrate
