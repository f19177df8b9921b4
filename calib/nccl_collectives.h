// NCCL collective benchmarks on the local GPUs (one process, one
// communicator per group size via ncclCommInitAll): all-reduce, all-gather,
// reduce-scatter and all-to-all over groups of 2, 4, ... and all N GPUs, and
// send/receive between GPU 0 and 1; sizes 1 KB ... 4 GB in ×4 steps, capped by
// free device memory; bf16; CUDA events on every member's stream around each
// launch (the slowest member's time), warm-up runs, the median of the timed
// ones. Sizes are nccl-tests' S (program.proto's Collective.bytes); algbw =
// S / t and busbw = algbw × bus factor as nccl-tests' PERFORMANCE.md. Each
// (kind, group) is fitted with calibration::fit_collective, link NVLINK.
// Only built with CUDA; without it run_collective_benchmarks throws
// "not built with CUDA".
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "sim/proto/calibration.pb.h"

namespace lacuna::calibrate {

struct CollectiveBenchOptions {
  int repetitions = 20;
  int warmup = 5;
  int64_t min_bytes = 1024;
  int64_t max_bytes = int64_t{4} << 30;
  std::FILE* log = nullptr;  // one line per (kind, group) when set
};

struct CollectiveBenchResult {
  std::vector<calib::CollectiveFit> fits;
  std::string nccl_version;
  int device_count = 0;
};

// True in builds with CUDA.
bool collectives_built();

// Throws lacuna::Error without CUDA, without NCCL (kernels/nccl_loader.h) or on
// any CUDA / NCCL failure. Fewer than 2 GPUs: no fits (nothing to measure).
CollectiveBenchResult run_collective_benchmarks(const CollectiveBenchOptions& options);

// The sizes measured: min_bytes, ×4, ... up to max_bytes.
std::vector<int64_t> collective_sizes(int64_t min_bytes, int64_t max_bytes);

// Group sizes: powers of two ≥ 2 below n, and n itself (n ≥ 2).
std::vector<int> collective_group_sizes(int n);

}  // namespace lacuna::calibrate
