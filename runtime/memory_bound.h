// What the CPU executor will hold in memory, estimated from its plan before
// any buffer is allocated, so that a program too large for the machine is
// refused with the figure instead of dying of bad_alloc mid-setup (issue 16:
// GPT-1.3B on the CPU allocated 6.5 GB, then failed). docs/executor.md#memory.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/plan.h"
#include "sim/core/units.h"

namespace lacuna::runtime {

struct MemoryEstimate {
  Bytes kernel;    // every stream's kernel cases (one input set each)
  Bytes transfer;  // collective and p2p buffers, with the communicator's scratch
  Bytes spans;     // recorded spans of the kept iterations, and their merged copy
  // Saturates at INT64_MAX, as each part does.
  Bytes total() const;
};

// `kept_iterations`: iterations whose spans are kept (all of them with
// keep_all_iterations, else 1). Sums saturate at INT64_MAX.
MemoryEstimate estimate_cpu_memory(const Plan& plan, std::int64_t kept_iterations);

// The recorded spans of `kept_iterations` and their merged copy, as the
// executor holds them on the host (both backends).
Bytes estimate_span_memory(const Plan& plan, std::int64_t kept_iterations);

// Throws lacuna::Error naming `option` when the estimate exceeds `max` (0:
// no limit),
// with each part and what would reduce it.
void check_memory(const MemoryEstimate& estimate, Bytes max, const std::string& option);

}  // namespace lacuna::runtime
