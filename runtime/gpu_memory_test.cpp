// The CUDA backend's device-memory bound (runtime/gpu_memory.h). The
// arithmetic runs everywhere; on a GPU, the measured cost of one stream's
// context stays under the reserve, and a rank that does not fit its GPU is
// refused before anything is allocated.
#include "runtime/gpu_memory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <iostream>
#include <string>

#include "kernels/gpu_case.h"
#include "runtime/backend.h"
#include "runtime/runtime_test_support.h"
#include "sim/core/error.h"
#include "sim/engine/engine_test_support.h"

namespace lacuna::runtime {
namespace {

using engine::testing::add_class;
using engine::testing::add_rank;
using ::testing::HasSubstr;

// Two ranks: a 1024×512×256 GEMM each and a collective of `bytes`.
ir::Program two_ranks(ir::CollectiveKind kind, int64_t bytes) {
  return testing::two_ranks_gemm_and_collective(1024, 512, 256, kind, bytes);
}

TEST(GpuMemory, TheEstimateAddsCaseSetsNcclBuffersAndStreamReserves) {
  const Plan plan = make_plan(two_ranks(ir::ALL_REDUCE, 4 << 20), PlanOptions{});
  const GpuMemoryEstimate e = estimate_gpu_memory(plan, 1);
  // One rank: X [1024, 256], W [256, 512], Y [1024, 512] in bf16.
  EXPECT_EQ(e.kernel, Bytes(2 * (1024 * 256 + 256 * 512 + 1024 * 512)));
  // "dp": buffer a of 2^21 bf16 elements and a one-element b; "compute": 1 + 1.
  EXPECT_EQ(e.transfer, Bytes(2 * ((int64_t{1} << 21) + 1) + 2 * 2));
  EXPECT_EQ(e.contexts, Bytes(2 * kCudaStreamReserve.count()));
  EXPECT_EQ(e.total(), e.kernel + e.transfer + e.contexts);
}

TEST(GpuMemory, SplitCollectivesRoundToTheGroupAndAllToAllNeedsASecondBuffer) {
  // 10 bytes = 5 elements, all-to-all over 2 ranks: 6 elements, in a and in b.
  const Plan plan = make_plan(two_ranks(ir::ALL_TO_ALL, 10), PlanOptions{});
  const StreamPlan* dp = nullptr;
  for (const StreamPlan& sp : plan.streams) {
    if (sp.rank == 0 && sp.name == "dp") dp = &sp;
  }
  ASSERT_NE(dp, nullptr);
  const NcclBufferElements e = nccl_buffer_elements(*dp);
  EXPECT_EQ(e.a, 6u);
  EXPECT_EQ(e.b, 6u);
  EXPECT_EQ(nccl_bf16_elements(dp->ops[0]), 6u);
}

TEST(GpuMemory, ARankAboveTheFreeMemoryIsRefusedWithItsParts) {
  const Plan plan = make_plan(two_ranks(ir::ALL_REDUCE, int64_t{40} << 30), PlanOptions{});
  const GpuMemoryEstimate e = estimate_gpu_memory(plan, 0);
  EXPECT_NO_THROW(check_gpu_memory(e, e.total(), 0, "GPU 0 (test)"));
  try {
    check_gpu_memory(e, Bytes(int64_t{20} << 30), 0, "GPU 0 (test)");
    FAIL() << "no error";
  } catch (const Error& err) {
    const std::string what = err.what();
    EXPECT_THAT(what, HasSubstr("rank 0 would allocate about 43.15 GB on GPU 0 (test)"));
    EXPECT_THAT(what, HasSubstr("NCCL buffers 42.95 GB"));
    EXPECT_THAT(what, HasSubstr("more than its 21.47 GB free"));
    EXPECT_THAT(what, HasSubstr("--scale-down"));
  }
}

TEST(GpuMemory, EstimatesSaturateInsteadOfWrapping) {
  // Four GEMMs whose outputs hold 2^60 bf16 elements each: 2^63 bytes in all.
  ir::Program p;
  ir::RankClass* cls = add_class(p, "r", 0, {"compute"});
  for (int64_t k = 1; k <= 4; ++k) testing::add_gemm(cls->mutable_streams(0), int64_t{1} << 30, int64_t{1} << 30, k);
  add_rank(p, 0);
  const GpuMemoryEstimate e = estimate_gpu_memory(make_plan(p, PlanOptions{}), 0);
  EXPECT_EQ(e.kernel, Bytes::max());
  EXPECT_EQ(e.total(), Bytes::max());
  // One output of 2^62 elements overflows its own byte count: too large, not wrapped.
  ir::Compute huge;
  huge.set_op_class(ir::GEMM);
  huge.set_variant(ir::VARIANT_FORWARD);
  for (int64_t d : {int64_t{1} << 31, int64_t{1} << 31, int64_t{1}}) huge.add_shape(d);
  EXPECT_THROW(kernels::gpu_case_set_bytes(huge), Error);
}

#ifdef LACUNA_HAVE_CUDA

TEST(CudaMemory, ContextCostsAtMostTheReserve) {
  if (!kernels::gpu_available()) GTEST_SKIP() << kernels::gpu_unavailable_reason();
  kernels::gpu::Context first(0);  // the CUDA context itself is not part of the reserve
  const int64_t before = first.free_memory_bytes();
  int64_t after = 0, resident = 0;
  {
    // One stream as the executor sets it up: a context, then a GEMM case
    // run once, which makes cuBLAS allocate its workspace.
    kernels::gpu::Context ctx(0);
    kernels::GpuCaseOptions one;
    one.max_sets = 1;
    ir::Compute gemm;
    gemm.set_op_class(ir::GEMM);
    gemm.set_variant(ir::VARIANT_FORWARD);
    for (int64_t d : {2048, 2048, 2048}) gemm.add_shape(d);
    const auto c = kernels::make_gpu_enqueue_case(gemm, ctx, one);
    c->enqueue();
    ctx.synchronize();
    resident = c->resident_bytes();
    after = ctx.free_memory_bytes();
  }
  const int64_t context_bytes = before - after - resident;
  std::cout << "[ measured ] one stream context (CUDA stream, events, cuBLAS handle and workspace): "
            << context_bytes << " bytes on " << first.device_name() << "\n";
  RecordProperty("context_bytes", std::to_string(context_bytes));
  EXPECT_LE(context_bytes, kCudaStreamReserve.count());
}

TEST(CudaMemory, ARankLargerThanItsGpuIsRefusedBeforeAllocating) {
  if (!kernels::gpu_available()) GTEST_SKIP() << kernels::gpu_unavailable_reason();
  kernels::gpu::Context probe(0);
  const int64_t free_before = probe.free_memory_bytes();
  // GEMMs of about 8.6 GB each (one set, under a quarter of an 80 GB GPU's
  // free memory, so each would build on its own), distinct shapes so that
  // each is its own case, enough of them to exceed the free memory.
  const int64_t m = 65536, set = 2 * (m * 8 * 2 + m * m);
  const int64_t count = free_before / set + 2;
  ir::Program p;
  ir::RankClass* cls = add_class(p, "r", 0, {"compute"});
  for (int64_t i = 0; i < count; ++i) testing::add_gemm(cls->mutable_streams(0), m, m, 8 + i);
  add_rank(p, 0);
  try {
    make_backend("cuda")->execute(p, ExecuteOptions{});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("rank 0 would allocate about"));
    EXPECT_THAT(std::string(e.what()), HasSubstr("GB free"));
  }
  // Nothing was left allocated (and nothing large was allocated at all).
  EXPECT_GE(probe.free_memory_bytes(), free_before - (int64_t{1} << 30));
}

#endif

}  // namespace
}  // namespace lacuna::runtime
