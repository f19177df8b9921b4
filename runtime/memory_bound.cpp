#include "runtime/memory_bound.h"

#include <fmt/format.h>

#include "kernels/cpu_case.h"
#include "runtime/executor.h"
#include "sim/core/error.h"
#include "sim/core/saturating.h"

namespace lacuna::runtime {

Bytes MemoryEstimate::total() const {
  return Bytes(saturating_add(saturating_add(kernel.count(), transfer.count()), spans.count()));
}

MemoryEstimate estimate_cpu_memory(const Plan& plan, std::int64_t kept_iterations) {
  std::int64_t kernel_bytes = 0, transfer_bytes = 0;
  // As the executor builds them: one input set per kernel case.
  kernels::CpuCaseOptions case_options;
  case_options.max_sets = 1;
  for (const StreamPlan& sp : plan.streams) {
    for (const ir::Compute& c : sp.computes) {
      try {
        kernel_bytes = saturating_add(kernel_bytes, kernels::cpu_case_resident_bytes(c, case_options));
      } catch (const Error&) {
        // A kernel the CPU cannot run: the stream's setup reports it, naming
        // the rank, stream and op, with what every other stream was doing.
      }
    }
    // Buffers a and b, plus the communicator's per-call scratch of at most
    // twice buffer a (reduce-scatter's 2 × output): 3a + b floats.
    const auto floats = static_cast<std::int64_t>(sp.buffer_a) * 3 + static_cast<std::int64_t>(sp.buffer_b);
    transfer_bytes = saturating_add(transfer_bytes, saturating_mul(floats, static_cast<std::int64_t>(sizeof(float))));
  }
  MemoryEstimate e;
  e.kernel = Bytes(kernel_bytes);
  e.transfer = Bytes(transfer_bytes);
  e.spans = estimate_span_memory(plan, kept_iterations);
  return e;
}

Bytes estimate_span_memory(const Plan& plan, std::int64_t kept_iterations) {
  std::int64_t ops = 0;
  for (const StreamPlan& sp : plan.streams) ops = saturating_add(ops, static_cast<std::int64_t>(sp.ops.size()));
  // Each stream's spans, then the merged, sorted result beside them.
  const auto span_bytes = static_cast<std::int64_t>(sizeof(ExecutedSpan));
  return Bytes(saturating_mul(saturating_mul(ops, kept_iterations), 2 * span_bytes));
}

void check_memory(const MemoryEstimate& estimate, Bytes max, const std::string& option) {
  if (max <= Bytes::zero() || estimate.total() <= max) return;
  throw Error(SourceLocation{{}, 0, 0, option},
              fmt::format("the executed program would hold about {:.2f} GB (kernel buffers {:.2f} GB, collective and "
                          "p2p buffers {:.2f} GB, recorded spans {:.2f} GB), above the limit of {:.2f} GB",
                          estimate.total().gb(), estimate.kernel.gb(), estimate.transfer.gb(), estimate.spans.gb(),
                          max.gb()),
              "execute a scaled-down program (--scale-down N), fewer ranks (--ranks with --replay) or fewer "
              "iterations, or raise " + option);
}

}  // namespace lacuna::runtime
