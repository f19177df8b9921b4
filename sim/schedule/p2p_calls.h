// Where a schedule's pipeline sends and receives happen when they block:
// Megatron-LM's communication calls (p2p_communication.py), each a batch of
// isend / irecv that compute (and the host) wait for in full. One
// representation for the compiler (blocking p2p, docs/compiler.md#pipeline-p2p)
// and the tests.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/schedule/schedule.h"

namespace lacuna::schedule {

// What an action sends and receives through the pipeline, given its virtual
// stage (first / last stages have no upstream / downstream neighbour, and a
// neighbouring stage on the same rank, the V layout's turn, needs no transfer).
struct ActionComm {
  bool recv = false;  // needs an activation (forward) or a gradient (backward) first
  bool send = false;  // produces one for a neighbour
};
ActionComm action_comm(const PipelineShape& shape, int32_t rank, const Action& action);

// One blocking call: its sends and receives (indices into the rank's
// actions) are issued together, and the rank's compute waits for all of them
// before continuing. It runs after action `after` (-1: before the first).
struct P2pCall {
  int32_t after = -1;
  std::vector<int32_t> sends;  // actions whose output it sends
  std::vector<int32_t> recvs;  // actions whose input it receives
  bool operator==(const P2pCall&) const = default;
};

// The calls of one pipeline rank in order, following Megatron-LM's schedules:
// - ONE_F_ONE_B (forward_backward_pipelining_without_interleaving): warm-up
//   and cool-down passes receive before and send after, each alone
//   (recv_forward / send_forward, recv_backward / send_backward); in the
//   steady state each pass's send is batched with the next pass's receive
//   (send_forward_recv_backward, send_backward_recv_forward).
// - INTERLEAVED_1F1B (forward_backward_pipelining_with_interleaving): a first
//   recv_forward; then after each warm-up forward, each steady (forward,
//   backward) pair and each cool-down backward one call with that step's
//   sends and the next step's receives (send_forward_recv_forward,
//   send_forward_backward_recv_forward_backward, send_backward_recv_backward).
// - GPIPE, ZB_H1 and schedule files: every pass's send batched with the next
//   pass's receive (a batched call never deadlocks between neighbours
//   sending to each other); a file's lone recompute (Pass::kRecompute) runs
//   between the pass and that call.
// Calls with nothing to send or receive are omitted.
std::vector<P2pCall> blocking_p2p_calls(lacuna::scenario::ScheduleKind kind, const PipelineShape& shape, int32_t rank,
                                        const std::vector<Action>& actions);

}  // namespace lacuna::schedule
