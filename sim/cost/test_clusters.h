// Clusters for the cost-model tests, every field filled explicitly with the
// published figures of models-and-hardware.md §2–3 (the same figures as the
// built-in presets, restated here so that these tests do not depend on them).
#pragma once

#include "sim/proto/scenario.pb.h"

namespace lacuna::cost::testing {

inline void set_link(scenario::LinkSpec* link, double gb_per_s, double latency_us, double efficiency) {
  link->set_bandwidth_gb_per_s(gb_per_s);
  link->set_latency_us(latency_us);
  link->set_efficiency(efficiency);
}

inline void set_efficiency(scenario::GpuSpec* gpu, const char* key, double flops, double memory) {
  scenario::Efficiency e;
  if (flops > 0) e.set_flops(flops);
  if (memory > 0) e.set_memory(memory);
  (*gpu->mutable_efficiency())[key] = e;
}

// DGX A100: 8 × A100 80GB SXM, NVLink 3 (300 GB/s per direction), 8 × HDR
// 200 Gb/s NICs. NVLink efficiency 0.77 = 230/300 (8-GPU ring all-reduce
// busbw); NIC efficiency 0.96 = 24/25 GB/s achievable per HDR NIC in NCCL.
inline scenario::Cluster dgx_a100(int64_t nodes) {
  scenario::Cluster c;
  auto* gpu = c.mutable_gpu();
  gpu->set_name("A100-SXM4-80GB");
  gpu->set_peak_bf16_tflops(312);
  gpu->set_peak_fp16_tflops(312);
  gpu->set_peak_tf32_tflops(156);
  gpu->set_hbm_bandwidth_gb_per_s(2039);
  gpu->set_hbm_capacity_gib(80);
  gpu->set_num_sms(108);
  set_efficiency(gpu, "GEMM", 0.78, 0.8);
  set_efficiency(gpu, "DEFAULT", 0.5, 0.7);
  gpu->set_kernel_overhead_us(4);
  c.set_num_nodes(nodes);
  c.set_gpus_per_node(8);
  set_link(c.mutable_nvlink(), 300, 0.6, 0.77);
  c.set_nvls(false);
  set_link(c.mutable_nic(), 25, 2.7, 0.96);
  c.set_nics_per_node(8);
  c.set_topology(scenario::RAIL_OPTIMIZED);
  return c;
}

// HGX H100 / H200: NVLink 4 (450 GB/s per direction) through NVSwitch gen3
// with NVLS, 8 × NDR 400 Gb/s NICs. NVLink efficiency 0.82 ≈ 368/450 (8-GPU
// ring all-reduce busbw 365–370); NIC efficiency 0.95 (46–49 of 50 GB/s).
inline scenario::Cluster hgx_hopper(int64_t nodes, double hbm_gb_per_s = 3350) {
  scenario::Cluster c;
  auto* gpu = c.mutable_gpu();
  gpu->set_name("H100-SXM5-80GB");
  gpu->set_peak_bf16_tflops(989);
  gpu->set_peak_fp16_tflops(989);
  gpu->set_peak_fp8_tflops(1979);
  gpu->set_peak_tf32_tflops(495);
  gpu->set_hbm_bandwidth_gb_per_s(hbm_gb_per_s);
  gpu->set_hbm_capacity_gib(80);
  gpu->set_num_sms(132);
  set_efficiency(gpu, "GEMM", 0.8, 0.85);
  set_efficiency(gpu, "ELEMENTWISE", 0, 0.8);
  set_efficiency(gpu, "DEFAULT", 0.5, 0.7);
  gpu->set_kernel_overhead_us(3);
  c.set_num_nodes(nodes);
  c.set_gpus_per_node(8);
  set_link(c.mutable_nvlink(), 450, 0.6, 0.82);
  c.set_nvls(true);
  set_link(c.mutable_nic(), 50, 2.7, 0.95);
  c.set_nics_per_node(8);
  c.set_topology(scenario::RAIL_OPTIMIZED);
  return c;
}

}  // namespace lacuna::cost::testing
