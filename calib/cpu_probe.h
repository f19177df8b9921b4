// Quick CPU speed probes for planning `lacuna calibrate --cpu`: what one
// thread achieves in a float32 GEMM and in memcpy. They feed the time
// estimate of each point (and so the --max-point-seconds skip rule); the
// profile's numbers come from the benchmarks themselves.
#pragma once

namespace lacuna::calibrate {

struct CpuSpeed {
  double flops_per_s = 0;  // kernels::blocked_gemm, 256³, best of 3
  double bytes_per_s = 0;  // memcpy of 64 MiB, read + write counted, best of 3
};

CpuSpeed probe_cpu_speed();

}  // namespace lacuna::calibrate
