// `lacuna goodput` as a library (docs/goodput.md): a scenario's iteration
// time from a folded simulation, its checkpoint from the compiled program's
// memory, its components from its cluster with the sourced default rates
// (goodput/fleet_defaults.h), then the Monte Carlo over the whole run
// (goodput::simulate_goodput).
#pragma once

#include <cstdint>
#include <optional>

#include "sim/core/units.h"
#include "sim/goodput/goodput.h"
#include "sim/run/network_setup.h"
#include "sim/scenario/scenario.h"

namespace lacuna::run {

// Each setting here, when given, overrides the scenario's `reliability`
// section, which overrides the defaults (goodput/fleet_defaults.h).
struct GoodputOptions {
  double tokens = 0;  // the run trains this many tokens
  int32_t runs = 1000;
  uint64_t seed = 1;
  // Productive time between checkpoints, 0 for none; absent everywhere:
  // Daly's interval for the job's failure rate and blocking save.
  std::optional<double> checkpoint_interval_s;
  bool failures = true;  // false: no component fails (the run is its work and saves)
  // Storage for the checkpoint's upload and load; default Llama 3's
  // sustained 2 TB/s (arXiv 2407.21783, §3.3.1).
  std::optional<double> storage_gb_per_s;
  // Each GPU's copy to host memory; default PCIe 5.0 x16, 32 GT/s × 16 lanes
  // with 128b/130b encoding, 63.0 GB/s per direction (PCI-SIG).
  std::optional<double> host_link_gb_per_s;
  // The blocking part of a save, in seconds, instead of the copy over the
  // host link (measured saves block far longer than that copy:
  // docs/goodput.md#checkpoints).
  std::optional<double> save_blocking_s;
  NetworkMode network = NetworkMode::kFlow;
};

inline constexpr double kDefaultStorageGbPerS = 2000;
inline constexpr double kDefaultHostLinkGbPerS = 63.0;

struct GoodputReport {
  TimeNs iteration_time;  // folded simulation, no variability
  int64_t tokens_per_iteration = 0;
  int32_t gpus = 0;
  int64_t hosts = 0;
  int64_t iterations = 0;  // ⌈tokens / tokens_per_iteration⌉
  // The checkpoint: every distinct byte of weights and optimizer state
  // (per model-parallel group once, a distributed optimizer's shards each
  // once), and the largest share one GPU copies out.
  Bytes checkpoint_bytes, largest_share_bytes;
  double save_s = 0, upload_s = 0, load_s = 0;
  double storage_gb_per_s = 0, host_link_gb_per_s = 0;  // as resolved
  bool save_given = false;  // the blocking save was given, not the host-link copy
  double mtbf_s = 0;  // 1 / Λ of the job; infinite without failures
  double young_s = 0, daly_s = 0;
  goodput::GoodputInputs inputs;
  goodput::GoodputResult result;
};

// Throws lacuna::Error for a scenario that does not compile or simulate, or
// options out of range (naming the option by reference).
GoodputReport run_goodput(const scenario::LoadedScenario& scenario, const GoodputOptions& options);

}  // namespace lacuna::run
