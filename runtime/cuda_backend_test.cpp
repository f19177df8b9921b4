// The CUDA backend. Without CUDA in the build it must refuse clearly; with
// CUDA but no GPU the GPU tests skip with the reason; on a GPU: replay of a
// small program (GEMMs, emulated send/recv, a fixed-duration op, events).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "kernels/gpu_case.h"
#include "runtime/backend.h"
#include "runtime/replay.h"
#include "sim/core/error.h"
#include "runtime/runtime_test_support.h"
#include "sim/engine/engine_test_support.h"
#include "sim/proto/program.pb.h"

namespace lacuna::runtime {
namespace {

using ::testing::HasSubstr;
using testing::add_gemm;
using engine::testing::add_class;
using engine::testing::add_compute;
using engine::testing::add_rank;
using engine::testing::add_record;
using engine::testing::add_recv;
using engine::testing::add_send;
using engine::testing::add_wait;

#ifndef LACUNA_HAVE_CUDA

TEST(CudaBackend, ABuildWithoutCudaRefusesClearly) {
  try {
    make_backend("cuda");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("built without CUDA"));
  }
}

#else

TEST(CudaBackend, NameAndDescription) {
  const auto backend = make_backend("cuda");
  EXPECT_EQ(backend->name(), "cuda");
  EXPECT_THAT(backend->device_description(), HasSubstr("CUDA"));
}

TEST(CudaBackend, ReplaysOneRankWithEmulatedPeers) {
  if (!kernels::gpu_available()) GTEST_SKIP() << kernels::gpu_unavailable_reason();
  // Rank 0: compute stream: GEMM, GEMM, record e0, fixed 200 us, wait e1 >= 1, GEMM.
  //         comm stream: wait e0 >= 1, send to rank 1 (emulated), recv from rank 1 (emulated), record e1.
  // Rank 1 is not executed.
  ir::Program p;
  ir::RankClass* cls = add_class(p, "c", 2, {"compute", "comm"});
  add_rank(p, 0, {}, {1});
  add_rank(p, 0, {}, {0});
  ir::Stream* compute = cls->mutable_streams(0);
  ir::Stream* comm = cls->mutable_streams(1);
  add_gemm(compute, 1024, 1024, 1024);
  add_gemm(compute, 1024, 1024, 1024);
  add_record(compute, 0);
  add_compute(compute, 200'000);
  add_wait(compute, 1, 1);
  add_gemm(compute, 512, 512, 512);
  add_wait(comm, 0, 1);
  add_send(comm, 0, 1 << 20, 0, 1);
  add_recv(comm, 0, 1 << 20, 0, 1);
  add_record(comm, 1);

  ReplayTimes replay;
  replay.set(0, 1, 1, PredictedSpan{1'000'000, 1'300'000});  // send: 1.0 .. 1.3 ms
  replay.set(0, 1, 2, PredictedSpan{2'000'000, 2'500'000});  // recv: arrives at 2.5 ms
  ExecuteOptions options;
  options.ranks = {0};
  options.replay = &replay;
  options.iterations = 3;
  options.keep_all_iterations = false;
  const ExecutionResult r = make_backend("cuda")->execute(p, options);
  EXPECT_EQ(r.ranks, std::vector<int>{0});
  EXPECT_EQ(r.emulated_ops, 2);
  ASSERT_EQ(r.iteration_ns.size(), 3u);
  ASSERT_EQ(r.spans.size(), 10u);
  for (std::size_t i = 1; i < r.spans.size(); ++i) {
    const ExecutedSpan& a = r.spans[i - 1];
    const ExecutedSpan& b = r.spans[i];
    EXPECT_LE(b.ready_ns, b.start_ns);
    EXPECT_LE(b.start_ns, b.end_ns);
    if (a.stream == b.stream) {
      EXPECT_LE(a.end_ns, b.ready_ns);
    }
  }
  const ExecutedSpan* record0 = testing::find_span(r, 0, 0, 2);
  const ExecutedSpan* wait0 = testing::find_span(r, 0, 1, 0);
  const ExecutedSpan* recv = testing::find_span(r, 0, 1, 2);
  const ExecutedSpan* record1 = testing::find_span(r, 0, 1, 3);
  const ExecutedSpan* wait1 = testing::find_span(r, 0, 0, 4);
  const ExecutedSpan* fixed = testing::find_span(r, 0, 0, 3);
  ASSERT_TRUE(record0 && wait0 && recv && record1 && wait1 && fixed);
  EXPECT_GE(wait0->end_ns, record0->end_ns - 1000);  // event timestamps: ~1 us resolution
  EXPECT_GE(wait1->end_ns, record1->end_ns - 1000);
  EXPECT_GE(recv->end_ns, 2'500'000 - 5'000);  // t0 is stamped a few us before the start event
  EXPECT_GE(fixed->end_ns - fixed->start_ns, 200'000 - 2'000);
}

#endif

}  // namespace
}  // namespace lacuna::runtime
