#include "runtime/gpu_memory.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "kernels/gpu_case.h"
#include "sim/core/error.h"
#include "sim/core/saturating.h"

namespace lacuna::runtime {

namespace {

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

std::int64_t saturating(std::size_t n) {
  return n > static_cast<std::size_t>(kMax) ? kMax : static_cast<std::int64_t>(n);
}

bool moves_real_bytes(const PlannedOp& p) {
  const bool comm = p.kind == OpKind::kCollective || p.kind == OpKind::kSend || p.kind == OpKind::kRecv;
  return comm && !p.emulated && p.fixed_ns <= 0;
}

}  // namespace

std::size_t nccl_bf16_elements(const PlannedOp& p) {
  auto n = static_cast<std::size_t>((p.bytes + 1) / 2);
  if (p.kind == OpKind::kCollective &&
      (p.collective == CollectiveKind::kAllGather || p.collective == CollectiveKind::kReduceScatter ||
       p.collective == CollectiveKind::kAllToAll)) {
    const auto g = static_cast<std::size_t>(std::max(p.group_size, 1));
    n = (n + g - 1) / g * g;
  }
  return n;
}

NcclBufferElements nccl_buffer_elements(const StreamPlan& sp) {
  NcclBufferElements e;
  for (const PlannedOp& p : sp.ops) {
    if (!moves_real_bytes(p)) continue;
    e.a = std::max(e.a, nccl_bf16_elements(p));
    if (p.kind == OpKind::kCollective &&
        (p.collective == CollectiveKind::kAllToAll || p.collective == CollectiveKind::kReduce)) {
      e.b = std::max(e.b, nccl_bf16_elements(p));
    }
  }
  return e;
}

Bytes GpuMemoryEstimate::total() const {
  return Bytes(saturating_add(saturating_add(kernel.count(), transfer.count()), contexts.count()));
}

GpuMemoryEstimate estimate_gpu_memory(const Plan& plan, int rank) {
  std::int64_t kernel = 0, transfer = 0, streams = 0;
  for (const StreamPlan& sp : plan.streams) {
    if (sp.rank != rank) continue;
    ++streams;
    for (const ir::Compute& c : sp.computes) {
      try {
        kernel = saturating_add(kernel, kernels::gpu_case_set_bytes(c));
      } catch (const Error&) {
        // Reported by the stream's setup, with the op named.
      }
    }
    const NcclBufferElements e = nccl_buffer_elements(sp);
    const std::int64_t elements = saturating_add(saturating(e.a), saturating(e.b));
    transfer = saturating_add(transfer, saturating_mul(elements, 2));  // bf16
  }
  GpuMemoryEstimate g;
  g.kernel = Bytes(kernel);
  g.transfer = Bytes(transfer);
  g.contexts = Bytes(saturating_mul(streams, kCudaStreamReserve.count()));
  return g;
}

void check_gpu_memory(const GpuMemoryEstimate& estimate, Bytes free_bytes, int rank, const std::string& device) {
  if (estimate.total() <= free_bytes) return;
  throw Error(SourceLocation{},
              fmt::format("execute (cuda): rank {} would allocate about {:.2f} GB on {} (kernel buffers {:.2f} GB, "
                          "NCCL buffers {:.2f} GB, stream contexts {:.2f} GB), more than its {:.2f} GB free",
                          rank, estimate.total().gb(), device, estimate.kernel.gb(), estimate.transfer.gb(),
                          estimate.contexts.gb(), free_bytes.gb()),
              "execute a scaled-down program (--scale-down N), or replay fewer ranks per GPU (--replay --ranks R)");
}

}  // namespace lacuna::runtime
