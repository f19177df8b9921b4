// The memory-overhead post-pass (docs/memory-model.md#overheads): the
// communicators of a rank counted on a hand-built layout and on compiled
// layouts whose groups are known in closed form.
#include "sim/compiler/memory_overheads.h"

#include <gtest/gtest.h>

#include "sim/compiler/compiler_test_support.h"

namespace lacuna::compiler {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kGiB = int64_t{1} << 30;

void set_overheads(ir::Program& p, double context_gib, double communicator_mib) {
  auto* mo = p.mutable_cluster()->mutable_memory_overheads();
  mo->set_cuda_context_gib(context_gib);
  mo->set_nccl_communicator_mib(communicator_mib);
  mo->set_allocator_fragmentation(0.15);
}

void bind(ir::Program& p, int32_t class_id, std::vector<int32_t> groups, std::vector<int32_t> peers) {
  ir::RankBinding* b = p.add_ranks();
  b->set_class_id(class_id);
  for (int32_t g : groups) b->add_group(g);
  for (int32_t r : peers) b->add_peer(r);
}

TEST(MemoryOverheads, CountsDistinctGroupsAndOnePointToPointCommunicator) {
  ir::Program p;
  for (int i = 0; i < 4; ++i) p.add_group_slots();
  for (int i = 0; i < 2; ++i) p.add_peer_slots();
  for (int i = 0; i < 4; ++i) p.add_groups();
  p.add_classes();
  p.add_classes();
  p.add_classes();
  bind(p, 0, {0, 1, 1, -1}, {3, 2});    // groups 0 and 1 (1 bound twice) + p2p: 3
  bind(p, 1, {0, -1, -1, -1}, {-1, -1});  // group 0 only: 1
  bind(p, 0, {0, 1, 2, 3}, {-1, -1});   // four groups, no peer: 4
  bind(p, 1, {-1, -1, -1, -1}, {-1, 0});  // p2p only: 1
  EXPECT_EQ(rank_communicators(p, 0), 3);
  EXPECT_EQ(rank_communicators(p, 1), 1);
  EXPECT_EQ(rank_communicators(p, 2), 4);
  EXPECT_EQ(rank_communicators(p, 3), 1);

  set_overheads(p, 0.5, 656);
  apply_memory_overheads(p);
  // A class is charged for its worst rank; class 2 has no rank (no NCCL).
  EXPECT_EQ(p.classes(0).memory().other_bytes(), kGiB / 2 + 4 * 656 * kMiB);
  EXPECT_EQ(p.classes(1).memory().other_bytes(), kGiB / 2 + 1 * 656 * kMiB);
  EXPECT_EQ(p.classes(2).memory().other_bytes(), kGiB / 2);
  // Overwrites: a second application changes nothing.
  apply_memory_overheads(p);
  EXPECT_EQ(p.classes(0).memory().other_bytes(), kGiB / 2 + 4 * 656 * kMiB);
  // Model state is untouched.
  EXPECT_EQ(p.classes(0).memory().weights_bytes(), 0);
}

TEST(MemoryOverheads, UnsetFieldsCountZero) {
  ir::Program p;
  p.add_group_slots();
  p.add_groups();
  p.add_classes();
  bind(p, 0, {0}, {});
  apply_memory_overheads(p);
  EXPECT_EQ(p.classes(0).memory().other_bytes(), 0);
}

// Compiled layouts (docs/compiler.md, "Ranks, groups, classes"): slots tp, cp,
// dp, dp_cp, embedding, grad_norm; equal rank sets are one group.
int32_t communicators_of_compiled(testing::Small s, int32_t rank) {
  const ir::Program p = compile(testing::make_scenario(s));
  return rank_communicators(p, rank);
}

TEST(MemoryOverheads, CompiledLayoutsCountTheirCommunicators) {
  testing::Small s;  // tp 2, cp 1, pp 2, dp 2, distributed optimizer
  // tp, dp (= dp_cp), embedding (first and last stage: every rank with
  // pp = 2), grad_norm (the world) and the pipeline's p2p: 5.
  for (int32_t r = 0; r < 8; ++r) EXPECT_EQ(communicators_of_compiled(s, r), 5) << r;
  // Without the distributed optimizer grad_norm is tp × pp (4 ranks), still
  // its own group: 5.
  s.distributed_optimizer = false;
  EXPECT_EQ(communicators_of_compiled(s, 0), 5);
  // pp = 1: no embedding group, no p2p; grad_norm = tp × pp = the tp group:
  // tp and dp only.
  s.pp = 1;
  s.dp = 4;
  EXPECT_EQ(communicators_of_compiled(s, 0), 2);
  // With the distributed optimizer grad_norm is the world, a third group.
  s.distributed_optimizer = true;
  EXPECT_EQ(communicators_of_compiled(s, 0), 3);
  // tp = 1 as well: no tp group; dp and the world are the same 4 ranks.
  s.tp = 1;
  s.dp = 8;
  s.heads = 8;
  EXPECT_EQ(communicators_of_compiled(s, 0), 1);
}

TEST(MemoryOverheads, GptOn3072GpusHoldsFiveCommunicatorsPerRank) {
  // TP 8, PP 8 (v 12), DP 48, distributed optimizer: tp, dp, embedding on the
  // first and last stage, the world, p2p; middle stages have no embedding.
  ir::Program p = compile(testing::make_scenario(testing::gpt3_3072()));
  set_overheads(p, 0.5, 656);
  apply_memory_overheads(p);
  ASSERT_EQ(p.classes_size(), 8);
  for (int32_t c = 0; c < 8; ++c) {
    const int64_t n = c == 0 || c == 7 ? 5 : 4;
    EXPECT_EQ(p.classes(c).memory().other_bytes(), kGiB / 2 + n * 656 * kMiB) << c;
  }
}

}  // namespace
}  // namespace lacuna::compiler
