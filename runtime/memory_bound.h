// What the CPU executor will hold in memory, estimated from its plan before
// any buffer is allocated, so that a program too large for the machine is
// refused with the figure instead of dying of bad_alloc mid-setup (issue 16:
// GPT-1.3B on the CPU allocated 6.5 GB, then failed). docs/executor.md#memory.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/plan.h"

namespace lacuna::runtime {

struct MemoryEstimate {
  std::int64_t kernel_bytes = 0;     // every stream's kernel cases (one input set each)
  std::int64_t transfer_bytes = 0;   // collective and p2p buffers, with the communicator's scratch
  std::int64_t span_bytes = 0;       // recorded spans of the kept iterations, and their merged copy
  std::int64_t total() const { return kernel_bytes + transfer_bytes + span_bytes; }
};

// `kept_iterations`: iterations whose spans are kept (all of them with
// keep_all_iterations, else 1). Sums saturate at INT64_MAX.
MemoryEstimate estimate_cpu_memory(const Plan& plan, std::int64_t kept_iterations);

// Throws lacuna::Error naming `option` when the estimate exceeds max_bytes,
// with each part and what would reduce it.
void check_memory(const MemoryEstimate& estimate, std::int64_t max_bytes, const std::string& option);

}  // namespace lacuna::runtime
