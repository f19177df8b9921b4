// Which NCCL communicators the CUDA backend makes, on the CPU: the same list
// for every process, mismatches reported before anything runs.
#include "runtime/cuda_nccl.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/plan.h"
#include "sim/core/error.h"
#include "sim/engine/engine_test_support.h"

namespace lacuna::runtime {
namespace {

using ::testing::HasSubstr;
using engine::testing::add_class;
using engine::testing::add_collective;
using engine::testing::add_group;
using engine::testing::add_rank;
using engine::testing::add_recv;
using engine::testing::add_send;

// Two ranks: all-reduces on "tp", rank 0 -> rank 1 on channel 0 and back on channel 1.
ir::Program two_ranks(int rank1_all_reduces, int rank1_recvs) {
  ir::Program p;
  const int g = add_group(p, ir::TP, {0, 1});
  ir::RankClass* a = add_class(p, "a", 0, {"tp", "pp"});
  ir::RankClass* b = add_class(p, "b", 0, {"tp", "pp"});
  add_rank(p, 0, {g}, {1});
  add_rank(p, 1, {g}, {0});
  for (int i = 0; i < 2; ++i) add_collective(a->mutable_streams(0), ir::ALL_REDUCE, 0, 4096);
  for (int i = 0; i < rank1_all_reduces; ++i) add_collective(b->mutable_streams(0), ir::ALL_REDUCE, 0, 4096);
  add_send(a->mutable_streams(1), 0, 1024, 0, 1);
  add_recv(a->mutable_streams(1), 0, 1024, 1, 2);
  for (int i = 0; i < rank1_recvs; ++i) add_recv(b->mutable_streams(1), 0, 1024, 0, 1);
  add_send(b->mutable_streams(1), 0, 1024, 1, 2);
  return p;
}

TEST(CudaNccl, OneCommunicatorPerGroupStreamAndDirection) {
  const Plan plan = make_plan(two_ranks(2, 1), PlanOptions{});
  const auto specs = comm_specs(plan);
  ASSERT_EQ(specs.size(), 4u);
  EXPECT_EQ(specs[0].key.kind, CommKind::kWorld);
  EXPECT_EQ(specs[0].members, (std::vector<int>{0, 1}));
  EXPECT_EQ(specs[1].key.kind, CommKind::kGroup);
  EXPECT_EQ(specs[1].key.stream, "tp");
  EXPECT_EQ(specs[1].members, (std::vector<int>{0, 1}));
  EXPECT_EQ(specs[2].key.kind, CommKind::kP2p);
  EXPECT_EQ(specs[2].key.a, 0);
  EXPECT_EQ(specs[2].key.b, 1);
  EXPECT_EQ(specs[2].key.channel, 0);
  EXPECT_EQ(specs[3].key.a, 1);
  EXPECT_EQ(specs[3].key.b, 0);
  EXPECT_EQ(specs[3].key.channel, 1);
  EXPECT_EQ(specs[3].members, (std::vector<int>{0, 1}));
  // Both sides of a transfer name the same communicator.
  const StreamPlan& send0 = plan.streams[1];
  const StreamPlan& recv1 = plan.streams[3];
  EXPECT_EQ(comm_key_of(send0, send0.ops[0]), comm_key_of(recv1, recv1.ops[0]));
}

TEST(CudaNccl, MismatchedCollectivesAreReportedBeforeRunning) {
  const Plan plan = make_plan(two_ranks(1, 1), PlanOptions{});
  try {
    comm_specs(plan);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("mismatched collectives on group 0 (streams 'tp')"));
    EXPECT_THAT(std::string(e.what()), HasSubstr("rank 0: 2; rank 1: 1;"));
  }
}

TEST(CudaNccl, ASendWithoutAReceiveIsReportedBeforeRunning) {
  const Plan plan = make_plan(two_ranks(2, 0), PlanOptions{});
  try {
    comm_specs(plan);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("rank 0 sends 1 message(s) to rank 1 on channel 0 but rank 1 receives 0"));
  }
}

TEST(CudaNccl, ReplayedRanksNeedNoCommunicator) {
  ReplayTimes replay;
  for (int op = 0; op < 2; ++op) replay.set(0, 0, op, PredictedSpan{0, 10});
  for (int op = 0; op < 2; ++op) replay.set(0, 1, op, PredictedSpan{0, 10});
  const Plan plan = make_plan(two_ranks(2, 1), PlanOptions{.ranks = {0}, .replay = &replay});
  EXPECT_TRUE(comm_specs(plan).empty());
}

}  // namespace
}  // namespace lacuna::runtime
