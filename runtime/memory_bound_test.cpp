// The CPU executor's memory bound (runtime/memory_bound.h): the estimate
// adds up what the executor allocates, and a run above the limit is refused
// before any buffer exists (issue 16: GPT-1.3B on the CPU allocated 6.5 GB
// and then died of bad_alloc).
#include "runtime/memory_bound.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "runtime/executor.h"
#include "runtime/runtime_test_support.h"

namespace lacuna::runtime {
namespace {

using ::testing::HasSubstr;

// Two ranks: a 1024×1024×1024 GEMM each and an all-reduce of `bytes`.
ir::Program two_ranks(int64_t bytes) {
  return testing::two_ranks_gemm_and_collective(1024, 1024, 1024, ir::ALL_REDUCE, bytes);
}

TEST(MemoryBound, TheEstimateAddsKernelTransferAndSpanBytes) {
  const Plan plan = make_plan(two_ranks(4 << 20), PlanOptions{});
  const MemoryEstimate e = estimate_cpu_memory(plan, 3);
  // Two GEMM cases of x, w, y (3 × 2^20 floats each, one set).
  EXPECT_EQ(e.kernel, Bytes(2 * 3 * (int64_t{1} << 20) * 4));
  // Per rank: buffer a (2^20 floats) three times with the scratch.
  EXPECT_EQ(e.transfer, Bytes(2 * 3 * (int64_t{1} << 20) * 4));
  // Four ops (one per stream and rank), three iterations, twice.
  EXPECT_EQ(e.spans, Bytes(4 * 3 * 2 * static_cast<int64_t>(sizeof(ExecutedSpan))));
  EXPECT_EQ(e.total(), e.kernel + e.transfer + e.spans);
}

TEST(MemoryBound, ARunAboveTheLimitIsRefusedBeforeAllocating) {
  // 64 GB per rank: allocating it would take the machine down.
  const ir::Program p = two_ranks(int64_t{64} << 30);
  ExecuteOptions o;
  o.max_memory_bytes = int64_t{1} << 30;
  const std::string what = testing::execute_error(p, o);
  EXPECT_THAT(what, HasSubstr("--max-host-memory-gb"));
  EXPECT_THAT(what, HasSubstr("above the limit of 1.07 GB"));
  EXPECT_THAT(what, HasSubstr("collective and p2p buffers 412.32 GB"));
}

TEST(MemoryBound, EstimatesSaturateInsteadOfWrapping) {
  const Plan plan = make_plan(two_ranks(int64_t{1} << 40), PlanOptions{});
  const MemoryEstimate e = estimate_cpu_memory(plan, int64_t{1} << 62);
  EXPECT_EQ(e.spans, Bytes::max());
  EXPECT_EQ(e.total(), Bytes::max());  // saturates, never wraps
  EXPECT_GT(e.transfer, Bytes::zero());
}

}  // namespace
}  // namespace lacuna::runtime
