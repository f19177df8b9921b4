#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/engine/engine_test_support.h"
#include "sim/engine/simulator.h"

namespace lacuna::engine {
namespace {

using testing::add_class;
using testing::add_collective;
using testing::add_compute;
using testing::add_group;
using testing::add_rank;
using testing::add_record;
using testing::add_recv;
using testing::add_send;
using testing::add_wait;
using testing::ClosedFormCost;
using ::testing::HasSubstr;

DeadlockError run_expecting_deadlock(const ir::Program& p) {
  ClosedFormCost cost;
  Simulator sim(p, cost);
  try {
    sim.run();
  } catch (const DeadlockError& e) {
    return e;
  }
  ADD_FAILURE() << "expected a deadlock";
  return DeadlockError("", {});
}

TEST(Deadlock, RecvWithoutSendNamesRankStreamAndPeer) {
  ir::Program p;
  p.add_peer_slots()->set_name("pp_prev");
  auto* c0 = add_class(p, "first", 0, {"compute"});
  add_compute(c0->mutable_streams(0), 10);
  auto* c1 = add_class(p, "second", 0, {"compute", "pp_recv"});
  add_compute(c1->mutable_streams(0), 10);
  add_recv(c1->mutable_streams(1), 0, 64, 0, 3);
  add_rank(p, 0, {}, {1});
  add_rank(p, 1, {}, {0});
  const DeadlockError e = run_expecting_deadlock(p);
  ASSERT_EQ(e.blocked().size(), 1u);
  EXPECT_EQ(e.blocked()[0].rank, 1);
  EXPECT_EQ(e.blocked()[0].stream, "pp_recv");
  EXPECT_EQ(e.blocked()[0].op, 0);
  EXPECT_THAT(e.what(), HasSubstr("rank 1 stream pp_recv op 0: recv from rank 0 (channel 0, tag 3"));
  EXPECT_THAT(e.what(), HasSubstr("no matching send was reached"));
  EXPECT_THAT(e.what(), HasSubstr("deadlock at t = 0.000 ms"));
}

TEST(Deadlock, SendWithoutRecv) {
  ir::Program p;
  p.add_peer_slots()->set_name("next");
  auto* c = add_class(p, "sender", 0, {"pp_send"});
  add_send(c->mutable_streams(0), 0, 64, 2, 9);
  add_class(p, "idle", 0, {"compute"});
  add_rank(p, 0, {}, {1});
  add_rank(p, 1, {}, {-1});
  const DeadlockError e = run_expecting_deadlock(p);
  EXPECT_THAT(e.what(), HasSubstr("rank 0 stream pp_send op 0: send to rank 1 (channel 2, tag 9"));
  EXPECT_THAT(e.what(), HasSubstr("no matching recv was reached"));
}

TEST(Deadlock, WaitOnNeverRecordedEvent) {
  ir::Program p;
  auto* c = add_class(p, "solo", 3, {"compute", "side"});
  add_record(c->mutable_streams(1), 2);
  add_compute(c->mutable_streams(0), 1000);
  add_wait(c->mutable_streams(0), 2, 2);
  add_rank(p, 0);
  const DeadlockError e = run_expecting_deadlock(p);
  EXPECT_THAT(e.what(), HasSubstr("rank 0 stream compute op 1: wait event 2 >= 2 (recorded 1 time)"));
  EXPECT_THAT(e.what(), HasSubstr("t = 0.001 ms"));
}

TEST(Deadlock, AStreamWaitingForItsHostIsNeverStuck) {
  // Stream a's host issues its wait only at 5 ms: the run goes on until then
  // (the wake-up is an event), and the deadlock, found only after it, names
  // the wait, not the host.
  ir::Program p;
  auto* c = add_class(p, "solo", 1, {"a", "b"});
  add_wait(c->mutable_streams(0), 0, 1).set_host_ns(5'000'000);
  add_compute(c->mutable_streams(1), 1000);
  add_rank(p, 0);
  const DeadlockError e = run_expecting_deadlock(p);
  ASSERT_EQ(e.blocked().size(), 1u);
  EXPECT_THAT(e.what(), HasSubstr("deadlock at t = 5.000 ms"));
  EXPECT_THAT(e.what(), HasSubstr("rank 0 stream a op 0: wait event 0 >= 1 (recorded 0 times)"));
}

TEST(Deadlock, CollectiveWithMissingMemberNamesIt) {
  ir::Program p;
  auto* slot = p.add_group_slots();
  slot->set_name("tp");
  slot->set_kind(ir::TP);
  const int32_t g = add_group(p, ir::TP, {0, 1, 2, 3, 4, 5, 6, 7});
  auto* c = add_class(p, "member", 0, {"tp_comm"});
  add_collective(c->mutable_streams(0), ir::ALL_REDUCE, 0, 4096);
  add_class(p, "absent", 0, {"tp_comm"});
  for (int r = 0; r < 8; ++r) add_rank(p, r == 5 ? 1 : 0, {g});
  const DeadlockError e = run_expecting_deadlock(p);
  EXPECT_EQ(e.blocked().size(), 7u);
  EXPECT_THAT(e.what(), HasSubstr("rank 0 stream tp_comm op 0: ALL_REDUCE of 4096 bytes on group 0 (tp)"));
  EXPECT_THAT(e.what(), HasSubstr("7 of 8 members arrived, waiting for rank 5"));
}

TEST(Deadlock, LongListsAreCapped) {
  ir::Program p;
  auto* c = add_class(p, "stuck", 1, {"s0", "s1", "s2"});
  for (int s = 0; s < 3; ++s) add_wait(c->mutable_streams(s), 0, 1);
  for (int r = 0; r < 10; ++r) add_rank(p, 0);
  const DeadlockError e = run_expecting_deadlock(p);
  EXPECT_EQ(e.blocked().size(), 30u);
  EXPECT_THAT(e.what(), HasSubstr("30 streams cannot proceed"));
  EXPECT_THAT(e.what(), HasSubstr("... and 10 more"));
  // 20 listed lines + header + the "more" line.
  const std::string msg = e.what();
  EXPECT_EQ(std::count(msg.begin(), msg.end(), '\n'), 21);
}

TEST(Deadlock, CrossedWaitsBetweenStreams) {
  ir::Program p;
  auto* c = add_class(p, "crossed", 2, {"a", "b"});
  add_wait(c->mutable_streams(0), 1, 1);
  add_record(c->mutable_streams(0), 0);
  add_wait(c->mutable_streams(1), 0, 1);
  add_record(c->mutable_streams(1), 1);
  add_rank(p, 0);
  const DeadlockError e = run_expecting_deadlock(p);
  EXPECT_EQ(e.blocked().size(), 2u);
  EXPECT_THAT(e.what(), HasSubstr("rank 0 stream a op 0: wait event 1 >= 1 (recorded 0 times)"));
  EXPECT_THAT(e.what(), HasSubstr("rank 0 stream b op 0: wait event 0 >= 1 (recorded 0 times)"));
}

}  // namespace
}  // namespace lacuna::engine
