// Megatron-LM's blocking communication calls, derived by hand from
// megatron/core/pipeline_parallel/schedules.py for small pipelines, and the
// properties every grouping must have for every schedule.
#include "sim/schedule/p2p_calls.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>

#include "sim/proto/scenario.pb.h"

namespace lacuna::schedule {
namespace {

using lacuna::scenario::GPIPE;
using lacuna::scenario::INTERLEAVED_1F1B;
using lacuna::scenario::ONE_F_ONE_B;
using lacuna::scenario::ScheduleKind;
using lacuna::scenario::ZB_H1;

std::vector<P2pCall> calls_of(ScheduleKind kind, const PipelineShape& shape, int32_t rank) {
  return blocking_p2p_calls(kind, shape, rank, build_schedule(kind, shape)[static_cast<size_t>(rank)]);
}

// 1F1B, pp 4, 8 microbatches, first stage: actions
//   0 F0  1 F1  2 F2 | 3 F3  4 B0  5 F4  6 B1  7 F5  8 B2  9 F6  10 B3  11 F7  12 B4 | 13 B5  14 B6  15 B7
// Warm-up send_forward alone after each of F0..F2; steady
// send_forward_recv_backward after each forward (send_backward_recv_forward
// moves nothing on the first stage); cool-down recv_backward before B5..B7.
TEST(P2pCalls, OneFOneBFirstStageMatchesMegatron) {
  const std::vector<P2pCall> want = {
      {0, {0}, {}},   {1, {1}, {}},   {2, {2}, {}},    {3, {3}, {4}},   {5, {5}, {6}},
      {7, {7}, {8}},  {9, {9}, {10}}, {11, {11}, {12}}, {12, {}, {13}}, {13, {}, {14}},
      {14, {}, {15}},
  };
  EXPECT_EQ(calls_of(ONE_F_ONE_B, {.pp = 4, .virtual_stages = 1, .microbatches = 8}, 0), want);
}

// Last stage: actions F0 B0 F1 B1 … F7 B7 (no warm-up). recv_forward before
// F0; after each backward send_backward_recv_forward; after the last backward
// send_backward alone.
TEST(P2pCalls, OneFOneBLastStageMatchesMegatron) {
  std::vector<P2pCall> want = {{-1, {}, {0}}};
  for (int32_t b = 1; b < 15; b += 2) want.push_back({b, {b}, {b + 1}});
  want.push_back({15, {15}, {}});
  EXPECT_EQ(calls_of(ONE_F_ONE_B, {.pp = 4, .virtual_stages = 1, .microbatches = 8}, 3), want);
}

// A middle stage of 1F1B, pp 4, m 8, rank 1: warm-up 2 forwards, each with a
// recv_forward before and a send_forward after (separate calls); then the
// steady recv_forward; steady calls batch a send with the next receive; the
// last steady backward sends alone and each cool-down backward receives
// alone then sends alone.
TEST(P2pCalls, OneFOneBMiddleStageSplitsWarmupAndCooldownCalls) {
  // 0 F0 1 F1 | 2 F2 3 B0 4 F3 5 B1 6 F4 7 B2 8 F5 9 B3 10 F6 11 B4 12 F7 13 B5 | 14 B6 15 B7
  const std::vector<P2pCall> want = {
      {-1, {}, {0}},  {0, {0}, {}},    {0, {}, {1}},     {1, {1}, {}},     {1, {}, {2}},   {2, {2}, {3}},
      {3, {3}, {4}},  {4, {4}, {5}},   {5, {5}, {6}},    {6, {6}, {7}},    {7, {7}, {8}},  {8, {8}, {9}},
      {9, {9}, {10}}, {10, {10}, {11}}, {11, {11}, {12}}, {12, {12}, {13}}, {13, {13}, {}}, {13, {}, {14}},
      {14, {14}, {}}, {14, {}, {15}},  {15, {15}, {}},
  };
  EXPECT_EQ(calls_of(ONE_F_ONE_B, {.pp = 4, .virtual_stages = 1, .microbatches = 8}, 1), want);
}

// Every grouping: each transfer an action needs happens in exactly one call,
// receives before the action (call.after < action), sends after it
// (call.after ≥ action), and calls come in program order.
void expect_well_formed(ScheduleKind kind, const PipelineShape& shape) {
  const auto schedule = build_schedule(kind, shape);
  for (int32_t rank = 0; rank < shape.pp; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const auto& actions = schedule[static_cast<size_t>(rank)];
    const auto calls = blocking_p2p_calls(kind, shape, rank, actions);
    std::map<int32_t, int> sent, received;
    int32_t last_after = -1;
    for (const P2pCall& c : calls) {
      EXPECT_GE(c.after, last_after);
      last_after = c.after;
      EXPECT_FALSE(c.sends.empty() && c.recvs.empty());
      for (int32_t i : c.sends) {
        EXPECT_GE(c.after, i);
        ++sent[i];
      }
      for (int32_t i : c.recvs) {
        EXPECT_LT(c.after, i);
        ++received[i];
      }
    }
    for (int32_t i = 0; i < static_cast<int32_t>(actions.size()); ++i) {
      const ActionComm comm = action_comm(shape, rank, actions[static_cast<size_t>(i)]);
      EXPECT_EQ(sent[i], comm.send ? 1 : 0) << "action " << i;
      EXPECT_EQ(received[i], comm.recv ? 1 : 0) << "action " << i;
    }
  }
}

TEST(P2pCalls, EveryScheduleMovesEachTransferInExactlyOneCall) {
  for (auto [kind, pp, v, m] : {std::tuple{ONE_F_ONE_B, 4, 1, 8}, std::tuple{ONE_F_ONE_B, 4, 1, 2},
                                std::tuple{ONE_F_ONE_B, 2, 1, 1}, std::tuple{GPIPE, 4, 1, 6},
                                std::tuple{ZB_H1, 4, 1, 8}, std::tuple{INTERLEAVED_1F1B, 4, 2, 8},
                                std::tuple{INTERLEAVED_1F1B, 2, 3, 4}, std::tuple{INTERLEAVED_1F1B, 4, 3, 12}}) {
    SCOPED_TRACE(std::to_string(kind) + " pp " + std::to_string(pp) + " v " + std::to_string(v) + " m " +
                 std::to_string(m));
    expect_well_formed(kind, {.pp = pp, .virtual_stages = v, .microbatches = m});
  }
  // Optimus's dependency-point deferral changes the warm-up counts the calls follow.
  for (int d = 1; d <= 6; ++d) {
    SCOPED_TRACE("interleaved pp 4 v 2 m 8 deferral " + std::to_string(d));
    expect_well_formed(INTERLEAVED_1F1B, {.pp = 4, .virtual_stages = 2, .microbatches = 8, .warmup_deferral = d});
  }
}

// Interleaved: one call after every step, and in the steady state a step is
// a (forward, backward) pair whose call carries both sends and both of the
// next step's receives (send_forward_backward_recv_forward_backward).
TEST(P2pCalls, InterleavedSteadyCallsBatchBothDirections) {
  const PipelineShape shape{.pp = 4, .virtual_stages = 2, .microbatches = 8};
  const auto actions = build_schedule(INTERLEAVED_1F1B, shape)[1];
  const auto calls = blocking_p2p_calls(INTERLEAVED_1F1B, shape, 1, actions);
  // Rank 1 is a middle stage of both chunks (virtual stages 1 and 5 of 8):
  // every pass receives and sends. Warm-up is (4 − 1 − 1)·2 + (2 − 1)·4 = 8
  // forwards, then 16 − 8 = 8 steady pairs; the call after each steady pair
  // but the last moves four tensors.
  int four_tensor_calls = 0;
  for (const P2pCall& c : calls) four_tensor_calls += c.sends.size() == 2 && c.recvs.size() == 2;
  EXPECT_EQ(four_tensor_calls, 7);
  // The first call receives the first forward's activation before anything runs.
  ASSERT_FALSE(calls.empty());
  EXPECT_EQ(calls.front(), (P2pCall{-1, {}, {0}}));
}

}  // namespace
}  // namespace lacuna::schedule
