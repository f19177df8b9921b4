// The static memory peak of a program (docs/memory-model.md#feasibility) on
// hand-built classes: running sums, several streams, the allocator's reserve
// and the feasibility counts.
#include "sim/cost/memory_peak.h"

#include <gtest/gtest.h>

namespace lacuna::cost {
namespace {

void add_compute(ir::Stream& stream, int64_t delta) {
  stream.add_ops()->mutable_compute()->set_memory_delta_bytes(delta);
}

ir::RankClass class_with(const std::vector<std::vector<int64_t>>& streams) {
  ir::RankClass cls;
  for (const auto& deltas : streams) {
    ir::Stream* s = cls.add_streams();
    s->set_kind(ir::COMPUTE);
    for (int64_t d : deltas) add_compute(*s, d);
  }
  return cls;
}

TEST(ActivationPeak, HighestRunningSumInOpOrder) {
  // 5, 8, 6, 10, 3, 0: the peak is 10, reached after the fourth op.
  EXPECT_EQ(activation_peak_bytes(class_with({{5, 3, -2, 4, -7, -3}})), Bytes(10));
  // Never above zero: the iteration starts with no activations.
  EXPECT_EQ(activation_peak_bytes(class_with({{-4, 4}})), Bytes(0));
  EXPECT_EQ(activation_peak_bytes(class_with({{}})), Bytes(0));
}

TEST(ActivationPeak, OpsWithoutComputeCarryNoMemory) {
  ir::RankClass cls = class_with({{7}});
  ir::Stream* s = cls.mutable_streams(0);
  s->add_ops()->mutable_record()->set_event(0);
  add_compute(*s, 2);
  EXPECT_EQ(activation_peak_bytes(cls), Bytes(9));
}

TEST(ActivationPeak, StreamsAddTheirOwnPeaks) {
  // Stream 0 peaks at 6, stream 1 at 4: whatever the interleaving, the live
  // total never exceeds 10, and it reaches 10 when both peaks coincide.
  EXPECT_EQ(activation_peak_bytes(class_with({{6, -6}, {1, 3, -4}})), Bytes(10));
}

TEST(AllocatorReserve, CeilingOfTheFraction) {
  EXPECT_EQ(allocator_reserve_bytes(Bytes(100), 0.15), Bytes(15));
  EXPECT_EQ(allocator_reserve_bytes(Bytes(101), 0.15), Bytes(16));  // 15.15 → 16
  EXPECT_EQ(allocator_reserve_bytes(Bytes(100), 0), Bytes(0));
  EXPECT_EQ(allocator_reserve_bytes(Bytes(0), 0.15), Bytes(0));
  EXPECT_EQ(memory_peak_bytes(Bytes(1000), Bytes(200), 0.15), Bytes(1000 + 200 + 30));
}

ir::Program two_class_program(double capacity_gib, double fragmentation) {
  ir::Program p;
  p.mutable_cluster()->mutable_gpu()->set_hbm_capacity_gib(capacity_gib);
  p.mutable_cluster()->mutable_memory_overheads()->set_allocator_fragmentation(fragmentation);
  // Class 0: 1 GiB of state + 0.5 GiB peak of activations; class 1: 2 GiB of
  // state + 1 GiB.
  const int64_t gib = int64_t{1} << 30;
  for (int c = 0; c < 2; ++c) {
    ir::RankClass* cls = p.add_classes();
    *cls = class_with({{(c + 1) * gib / 2, -(c + 1) * gib / 2}});
    cls->mutable_memory()->set_weights_bytes((c + 1) * gib / 4);
    cls->mutable_memory()->set_gradients_bytes((c + 1) * gib / 4);
    cls->mutable_memory()->set_optimizer_bytes((c + 1) * gib / 4);
    cls->mutable_memory()->set_other_bytes((c + 1) * gib / 4);
  }
  // Ranks 0, 1 in class 0; ranks 2, 3, 4 in class 1.
  for (int32_t c : {0, 0, 1, 1, 1}) p.add_ranks()->set_class_id(c);
  return p;
}

TEST(Feasibility, CountsTheRanksOfClassesOverCapacity) {
  const Bytes gib(int64_t{1} << 30);
  {
    // Class 1 peaks at 2 + 1 + 0.1 = 3.1 GiB > 3 GiB; class 0 at 1.55 GiB.
    const Feasibility f = program_feasibility(two_class_program(3, 0.1));
    EXPECT_EQ(f.capacity, gib * 3);
    EXPECT_EQ(f.num_ranks, 5);
    EXPECT_EQ(f.over_capacity_ranks, 3);
    EXPECT_FALSE(f.fits());
    EXPECT_EQ(f.worst_class, 1);
    EXPECT_EQ(f.worst_rank, 2);
    EXPECT_EQ(f.worst.baseline, gib * 2);
    EXPECT_EQ(f.worst.activation_peak, gib);
    EXPECT_EQ(f.worst.reserve, allocator_reserve_bytes(gib, 0.1));
    EXPECT_EQ(f.worst.peak, gib * 3 + allocator_reserve_bytes(gib, 0.1));
  }
  // Without the reserve class 1 is exactly at capacity, which fits.
  EXPECT_TRUE(program_feasibility(two_class_program(3, 0)).fits());
  // Unknown capacity: every rank fits.
  ir::Program unknown = two_class_program(3, 0.1);
  unknown.mutable_cluster()->mutable_gpu()->clear_hbm_capacity_gib();
  EXPECT_TRUE(program_feasibility(unknown).fits());
  EXPECT_EQ(program_feasibility(unknown).capacity, Bytes(0));
}

}  // namespace
}  // namespace lacuna::cost
