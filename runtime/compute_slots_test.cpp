// ExecuteOptions::compute_slots: at most that many real compute kernels run at
// once, and the wait for a slot is idle time before the span's start, not
// kernel time. Only orderings the slot semantics guarantee are asserted.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/executor.h"
#include "sim/core/error.h"
#include "runtime/runtime_test_support.h"
#include "sim/engine/engine_test_support.h"
#include "sim/proto/program.pb.h"

namespace lacuna::runtime {
namespace {

using ::testing::HasSubstr;
using testing::add_gemm;

using engine::testing::add_class;
using engine::testing::add_rank;

// `ranks` independent ranks of one class, each with one compute stream of
// `gemms` GEMMs [64, 64, 64]: all of them start at the iteration barrier and
// compete for the slots.
ir::Program gemm_program(int ranks, int gemms) {
  ir::Program p;
  ir::RankClass* c = add_class(p, "r", 0, {"compute"});
  for (int i = 0; i < gemms; ++i) add_gemm(c->mutable_streams(0), 64, 64, 64);
  for (int r = 0; r < ranks; ++r) add_rank(p, 0);
  return p;
}

void expect_ready_le_start_le_end(const ExecutionResult& r) {
  for (const ExecutedSpan& s : r.spans) {
    EXPECT_LE(0, s.ready_ns);
    EXPECT_LE(s.ready_ns, s.start_ns) << "rank " << s.rank << " op " << s.op;
    EXPECT_LE(s.start_ns, s.end_ns) << "rank " << s.rank << " op " << s.op;
  }
}

TEST(ComputeSlots, OneSlotSerialisesKernelsOfDifferentRanks) {
  const ir::Program p = gemm_program(2, 3);
  const ExecutionResult r = execute(p, {.iterations = 2, .keep_all_iterations = true, .compute_slots = 1});
  ASSERT_EQ(r.spans.size(), 2u * 2u * 3u);
  expect_ready_le_start_le_end(r);
  // A kernel's end is taken before it releases its slot and the next one's
  // start after it took it: with one slot, no two [start, end] overlap.
  for (const ExecutedSpan& a : r.spans) {
    for (const ExecutedSpan& b : r.spans) {
      if (&a == &b || a.iteration != b.iteration || a.rank == b.rank) continue;
      EXPECT_TRUE(a.end_ns <= b.start_ns || b.end_ns <= a.start_ns)
          << "iteration " << a.iteration << ": rank " << a.rank << " op " << a.op << " [" << a.start_ns << ", "
          << a.end_ns << "] overlaps rank " << b.rank << " op " << b.op << " [" << b.start_ns << ", " << b.end_ns
          << "]";
    }
  }
}

TEST(ComputeSlots, AsManySlotsAsStreamsOrNoLimitRunEveryKernel) {
  const ir::Program p = gemm_program(2, 2);
  for (int slots : {0, 2, 8}) {
    SCOPED_TRACE("compute_slots " + std::to_string(slots));
    const ExecutionResult r = execute(p, {.compute_slots = slots});
    ASSERT_EQ(r.spans.size(), 4u);
    expect_ready_le_start_le_end(r);
    for (const ExecutedSpan& s : r.spans) EXPECT_GT(s.end_ns, s.start_ns);
  }
}

TEST(ComputeSlots, FixedDurationComputeNeedsNoSlot) {
  // Fixed-duration ops only wait: with one slot and a GEMM on each of two
  // ranks, the fixed ops still complete and the GEMMs stay serialised.
  ir::Program p = gemm_program(2, 1);
  engine::testing::add_compute(p.mutable_classes(0)->mutable_streams(0), 200'000);
  const ExecutionResult r = execute(p, {.compute_slots = 1});
  ASSERT_EQ(r.spans.size(), 4u);
  expect_ready_le_start_le_end(r);
  const ExecutedSpan* gemm[2] = {nullptr, nullptr};
  for (const ExecutedSpan& s : r.spans) {
    if (s.op == 0) gemm[s.rank] = &s;
    if (s.op == 1) {
      EXPECT_GE(s.end_ns - s.start_ns, 200'000);
    }
  }
  ASSERT_NE(gemm[0], nullptr);
  ASSERT_NE(gemm[1], nullptr);
  EXPECT_TRUE(gemm[0]->end_ns <= gemm[1]->start_ns || gemm[1]->end_ns <= gemm[0]->start_ns);
}

TEST(ComputeSlots, NegativeIsRejectedBeforeRunning) {
  const ir::Program p = gemm_program(1, 1);
  try {
    execute(p, {.compute_slots = -1});
    ADD_FAILURE() << "execute did not throw";
  } catch (const lacuna::Error& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("compute_slots"));
  }
}

}  // namespace
}  // namespace lacuna::runtime
