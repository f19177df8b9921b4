#include "sim/schedule/call_deadlock.h"

#include <gtest/gtest.h>

#include "sim/core/error.h"
#include "sim/core/error_testing.h"
#include "sim/proto/scenario.pb.h"
#include "sim/schedule/dualpipe.h"
#include "sim/schedule/dualpipev.h"
#include "sim/schedule/zbv.h"

namespace lacuna::schedule {
namespace {

using lacuna::scenario::ScheduleKind;
using testing_support::formatted_error_of;

std::vector<std::vector<P2pCall>> calls_of(ScheduleKind rule, const ActionSchedule& s, const PipelineShape& shape) {
  const auto passes = to_schedule(s, shape, "t");
  std::vector<std::vector<P2pCall>> out;
  for (int32_t r = 0; r < shape.pp; ++r)
    out.push_back(blocking_p2p_calls(rule, shape, r, passes[static_cast<size_t>(r)]));
  return out;
}

// Megatron-LM's own calls never deadlock, for every built-in schedule and a
// spread of shapes (warm-up longer than the microbatches included).
TEST(CallDeadlock, MegatronsCallsCompleteForEveryBuiltInSchedule) {
  for (int32_t pp : {2, 3, 4, 8})
    for (int32_t m : {1, 2, 3, 8, 16}) {
      for (ScheduleKind k : {lacuna::scenario::GPIPE, lacuna::scenario::ONE_F_ONE_B, lacuna::scenario::ZB_H1}) {
        const PipelineShape shape{.pp = pp, .virtual_stages = 1, .microbatches = m};
        const ActionSchedule s = to_actions(build_schedule(k, shape), shape);
        EXPECT_NO_THROW(check_blocking_calls(s, shape, calls_of(k, s, shape), "t"))
            << lacuna::scenario::ScheduleKind_Name(k) << " pp " << pp << " m " << m;
      }
      if (m % pp == 0)
        for (int32_t v : {2, 3}) {
          const PipelineShape shape{.pp = pp, .virtual_stages = v, .microbatches = m};
          const ActionSchedule s = to_actions(build_schedule(lacuna::scenario::INTERLEAVED_1F1B, shape), shape);
          EXPECT_NO_THROW(
              check_blocking_calls(s, shape, calls_of(lacuna::scenario::INTERLEAVED_1F1B, s, shape), "t"))
              << "interleaved pp " << pp << " v " << v << " m " << m;
        }
    }
}

// A call's transfers end one by one: rank 0 sends F0's output and receives
// B0's gradient in one call; rank 1 receives, computes, then sends in a
// later call. Rank 0 waits in its call until rank 1 reaches the second one:
// no deadlock.
TEST(CallDeadlock, TransfersOfOneCallEndOneByOne) {
  const PipelineShape shape{.pp = 2, .virtual_stages = 1, .microbatches = 1};
  const ActionSchedule s = parse_schedule("rank 0: 0F0 0B0\nrank 1: 1F0 1B0\n", "t");
  const std::vector<std::vector<P2pCall>> calls = {
      {P2pCall{0, {0}, {1}}},                        // rank 0: after F0, send it and receive B0's gradient
      {P2pCall{-1, {}, {0}}, P2pCall{1, {1}, {}}}};  // rank 1: receive F0's input; after B0, send
  EXPECT_NO_THROW(check_blocking_calls(s, shape, calls, "t"));
  // Rank 1 sending before it receives: both wait for the other's later call.
  const std::vector<std::vector<P2pCall>> crossed = {{P2pCall{-1, {}, {1}}, P2pCall{0, {0}, {}}},
                                                     {P2pCall{-1, {}, {0}}, P2pCall{1, {1}, {}}}};
  const ActionSchedule c = parse_schedule("rank 0: 0F0 0B0\nrank 1: 1F0 1B0\n", "t");
  const std::string e = formatted_error_of([&] { check_blocking_calls(c, shape, crossed, "c.txt"); });
  EXPECT_NE(e.find("the blocking p2p calls deadlock"), std::string::npos) << e;
  EXPECT_NE(e.find("rank 0: its blocking call before its first pass receives the input gradient of 0B0, which "
                   "rank 1 reaches only in its call after 1B0 (step 1), while it waits in its call before its "
                   "first pass"),
            std::string::npos)
      << e;
}

// The generated schedules need their transfers posted ahead: with the
// generic rule's blocking calls (each pass's sends batched with the next
// pass's receives) DualPipeV, DualPipe and ZB-V deadlock, as the engine
// finds when it runs them (docs/schedules.md#zb-v).
TEST(CallDeadlock, GeneratedSchedulesDeadlockUnderTheGenericRule) {
  struct Case {
    const char* name;
    ActionSchedule s;
    PipelineShape shape;
  };
  PipelineShape v{.pp = 2, .virtual_stages = 2, .microbatches = 8, .layout = StageLayout::kV};
  PipelineShape bidirectional{.pp = 2, .virtual_stages = 2, .microbatches = 8,
                              .layout = StageLayout::kBidirectional};
  PipelineShape zbv{.pp = 4, .virtual_stages = 2, .microbatches = 8, .layout = StageLayout::kV};
  for (const Case& c : {Case{"dualpipev", dualpipev_schedule(2, 8), v},
                        Case{"dualpipe", dualpipe_schedule(2, 8), bidirectional},
                        Case{"zb-v", zbv_schedule(4, 8, ZbvCosts{}), zbv}}) {
    const std::string e = formatted_error_of(
        [&] { check_blocking_calls(c.s, c.shape, calls_of(lacuna::scenario::CUSTOM, c.s, c.shape), c.name); });
    EXPECT_NE(e.find("the blocking p2p calls deadlock"), std::string::npos) << c.name << ": " << e;
    EXPECT_NE(e.find("P2P_OVERLAPPED"), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace lacuna::schedule
