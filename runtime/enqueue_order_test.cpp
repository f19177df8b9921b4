// The CUDA backend's enqueue order, on the CPU: every wait comes after the
// record it waits for, streams stay in order, deadlocks are reported.
#include "runtime/enqueue_order.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "runtime/plan.h"
#include "sim/core/error.h"
#include "sim/engine/engine_test_support.h"
#include "sim/proto/program.pb.h"

namespace lacuna::runtime {
namespace {

using ::testing::HasSubstr;
using engine::testing::add_class;
using engine::testing::add_compute;
using engine::testing::add_rank;
using engine::testing::add_record;
using engine::testing::add_wait;

std::vector<const StreamPlan*> rank_streams(const Plan& plan, int rank) {
  std::vector<const StreamPlan*> out;
  for (const StreamPlan& sp : plan.streams) {
    if (sp.rank == rank) out.push_back(&sp);
  }
  return out;
}

// A random one-rank program that is valid by construction: it is written
// down while running it, so a wait only asks for records already made.
ir::Program random_program(std::mt19937_64& rng, int num_streams, int num_events, int ops) {
  ir::Program p;
  ir::RankClass* cls = add_class(p, "c", num_events, {});
  for (int s = 0; s < num_streams; ++s) cls->add_streams()->set_name("s" + std::to_string(s));
  add_rank(p, 0);
  std::vector<std::int64_t> counter(static_cast<std::size_t>(num_events), 0);
  std::uniform_int_distribution<int> pick_stream(0, num_streams - 1), pick_event(0, num_events - 1), pick_kind(0, 2);
  for (int i = 0; i < ops; ++i) {
    ir::Stream* s = cls->mutable_streams(pick_stream(rng));
    const int e = pick_event(rng);
    switch (pick_kind(rng)) {
      case 0: add_compute(s, 1000); break;
      case 1:
        add_record(s, e);
        ++counter[static_cast<std::size_t>(e)];
        break;
      default: {
        std::uniform_int_distribution<std::int64_t> value(0, counter[static_cast<std::size_t>(e)]);
        add_wait(s, e, value(rng));
        break;
      }
    }
  }
  return p;
}

TEST(EnqueueOrder, RecordsComeBeforeTheirWaitsOnRandomPrograms) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int streams = 1 + trial % 5;
    const int events = 1 + trial % 4;
    const ir::Program program = random_program(rng, streams, events, 10 + trial % 60);
    const Plan plan = make_plan(program, PlanOptions{});
    const auto sps = rank_streams(plan, 0);
    const EnqueueOrder order = enqueue_order(sps, plan.num_events[0]);

    std::size_t total = 0;
    for (const StreamPlan* sp : sps) total += sp->ops.size();
    ASSERT_EQ(order.steps.size(), total) << "trial " << trial;

    std::vector<int> next(sps.size(), 0);
    std::vector<std::int64_t> counter(static_cast<std::size_t>(events), 0);
    std::map<std::pair<int, std::int64_t>, std::size_t> record_at;  // (event, instance) -> step
    for (std::size_t i = 0; i < order.steps.size(); ++i) {
      const EnqueueStep& st = order.steps[i];
      ASSERT_EQ(st.op, next[static_cast<std::size_t>(st.stream)]) << "stream order broken, trial " << trial;
      ++next[static_cast<std::size_t>(st.stream)];
      const PlannedOp& p = sps[static_cast<std::size_t>(st.stream)]->ops[static_cast<std::size_t>(st.op)];
      if (p.kind == OpKind::kRecord) {
        EXPECT_EQ(st.instance, ++counter[static_cast<std::size_t>(p.event)]);
        record_at[{p.event, st.instance}] = i;
      } else if (p.kind == OpKind::kWait) {
        EXPECT_GE(counter[static_cast<std::size_t>(p.event)], p.value) << "trial " << trial;
        EXPECT_EQ(st.instance, p.value);
        if (p.value > 0) {
          ASSERT_TRUE(record_at.count({p.event, p.value})) << "trial " << trial;
          EXPECT_LT((record_at[{p.event, p.value}]), i);
        }
      } else {
        EXPECT_EQ(st.instance, 0);
      }
    }
    EXPECT_EQ(order.records_per_event, counter) << "trial " << trial;
  }
}

TEST(EnqueueOrder, RoundRobinInterleavesIndependentStreams) {
  ir::Program p;
  ir::RankClass* cls = add_class(p, "c", 0, {"a", "b"});
  add_rank(p, 0);
  for (int i = 0; i < 3; ++i) {
    add_compute(cls->mutable_streams(0), 10);
    add_compute(cls->mutable_streams(1), 10);
  }
  const Plan plan = make_plan(p, PlanOptions{});
  const EnqueueOrder order = enqueue_order(rank_streams(plan, 0), 0);
  ASSERT_EQ(order.steps.size(), 6u);
  for (std::size_t i = 0; i < 6; ++i) EXPECT_EQ(order.steps[i].stream, static_cast<int>(i % 2));
}

TEST(EnqueueOrder, AWaitBeforeItsRecordInStreamOrderIsDeferred) {
  // Stream 0 waits for what stream 1 records after two computes.
  ir::Program p;
  ir::RankClass* cls = add_class(p, "c", 1, {"consumer", "producer"});
  add_rank(p, 0);
  add_wait(cls->mutable_streams(0), 0, 1);
  add_compute(cls->mutable_streams(0), 10);
  add_compute(cls->mutable_streams(1), 10);
  add_compute(cls->mutable_streams(1), 10);
  add_record(cls->mutable_streams(1), 0);
  const Plan plan = make_plan(p, PlanOptions{});
  const EnqueueOrder order = enqueue_order(rank_streams(plan, 0), 1);
  ASSERT_EQ(order.steps.size(), 5u);
  std::size_t record = 99, wait = 99;
  for (std::size_t i = 0; i < order.steps.size(); ++i) {
    if (order.steps[i].stream == 1 && order.steps[i].op == 2) record = i;
    if (order.steps[i].stream == 0 && order.steps[i].op == 0) wait = i;
  }
  EXPECT_LT(record, wait);
  EXPECT_EQ(order.steps[wait].instance, 1);
  EXPECT_EQ(order.records_per_event, std::vector<std::int64_t>{1});
}

TEST(EnqueueOrder, ABrokenProgramIsADeadlockNamingEveryStream) {
  // Each stream waits for the other's record, which comes after its wait.
  ir::Program p;
  ir::RankClass* cls = add_class(p, "c", 2, {"fwd", "bwd", "idle"});
  add_rank(p, 0);
  add_compute(cls->mutable_streams(0), 10);
  add_wait(cls->mutable_streams(0), 0, 1);
  add_record(cls->mutable_streams(0), 1);
  add_wait(cls->mutable_streams(1), 1, 1);
  add_record(cls->mutable_streams(1), 0);
  add_compute(cls->mutable_streams(2), 10);
  const Plan plan = make_plan(p, PlanOptions{});
  try {
    enqueue_order(rank_streams(plan, 0), 2);
    FAIL() << "no deadlock reported";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_THAT(what, HasSubstr("deadlock on rank 0"));
    EXPECT_THAT(what, HasSubstr("rank 0 stream 0 (fwd): blocked at op 1 (wait event 0 >= 1), counter at 0"));
    EXPECT_THAT(what, HasSubstr("rank 0 stream 1 (bwd): blocked at op 0 (wait event 1 >= 1), counter at 0"));
    EXPECT_THAT(what, HasSubstr("rank 0 stream 2 (idle): done"));
  }
}

TEST(EnqueueOrder, AWaitForMoreRecordsThanExistDeadlocks) {
  ir::Program p;
  ir::RankClass* cls = add_class(p, "c", 1, {"a"});
  add_rank(p, 0);
  add_record(cls->mutable_streams(0), 0);
  add_wait(cls->mutable_streams(0), 0, 2);
  const Plan plan = make_plan(p, PlanOptions{});
  try {
    enqueue_order(rank_streams(plan, 0), 1);
    FAIL() << "no deadlock reported";
  } catch (const Error& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("blocked at op 1 (wait event 0 >= 2), counter at 1"));
  }
}

}  // namespace
}  // namespace lacuna::runtime
