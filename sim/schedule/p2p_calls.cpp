#include "sim/schedule/p2p_calls.h"

#include <algorithm>

#include "sim/core/error.h"
#include "sim/proto/scenario.pb.h"

namespace lacuna::schedule {
namespace {

// Megatron-LM's warm-up lengths (as schedule.cpp builds the actions).
int32_t warmup_passes(lacuna::scenario::ScheduleKind kind, const PipelineShape& s, int32_t rank) {
  if (kind == lacuna::scenario::INTERLEAVED_1F1B) return interleaved_warmup(s, rank);
  return std::min(s.pp - rank - 1, s.microbatches);
}

void add(std::vector<P2pCall>& calls, P2pCall call) {
  if (!call.sends.empty() || !call.recvs.empty()) calls.push_back(std::move(call));
}

}  // namespace

ActionComm action_comm(const PipelineShape& shape, int32_t rank, const Action& action) {
  const int32_t vs = virtual_stage(shape, rank, action.chunk);
  // A neighbouring stage on this same rank (the V layout's turn) hands its
  // tensor over in place: no transfer. The bidirectional layout's stages pp − 1
  // and pp are no neighbours: one pipeline ends, the other starts.
  const bool prev_remote = has_previous_stage(shape, vs) && rank_of_stage(shape, vs - 1) != rank;
  const bool next_remote = has_next_stage(shape, vs) && rank_of_stage(shape, vs + 1) != rank;
  switch (action.pass) {
    case Pass::kForward: return {prev_remote, next_remote};
    case Pass::kBackward:
    case Pass::kBackwardInput: return {next_remote, prev_remote};
    case Pass::kBackwardWeight:
    case Pass::kRecompute: return {false, false};
  }
  return {};
}

std::vector<P2pCall> blocking_p2p_calls(lacuna::scenario::ScheduleKind kind, const PipelineShape& shape, int32_t rank,
                                        const std::vector<Action>& actions) {
  const int32_t n = static_cast<int32_t>(actions.size());
  std::vector<ActionComm> comm(actions.size());
  for (int32_t i = 0; i < n; ++i) comm[i] = action_comm(shape, rank, actions[i]);
  auto sends = [&](const std::vector<int32_t>& step) {
    std::vector<int32_t> out;
    for (int32_t i : step)
      if (comm[i].send) out.push_back(i);
    return out;
  };
  auto receives = [&](const std::vector<int32_t>& step) {
    std::vector<int32_t> out;
    for (int32_t i : step)
      if (comm[i].recv) out.push_back(i);
    return out;
  };

  // Steps: the groups of actions between two calls.
  std::vector<std::vector<int32_t>> steps;
  // Between steps k and k+1: batched (one call) or send then receive (two).
  std::vector<bool> batched;
  if (kind == lacuna::scenario::INTERLEAVED_1F1B) {
    const int32_t warmup = warmup_passes(kind, shape, rank);
    const int32_t total = shape.microbatches * shape.virtual_stages;
    int32_t i = 0;
    for (; i < warmup; ++i) steps.push_back({i});
    for (int32_t k = 0; k < total - warmup; ++k, i += 2) steps.push_back({i, i + 1});
    for (; i < n; ++i) steps.push_back({i});
    batched.assign(steps.size(), true);
  } else if (kind == lacuna::scenario::ONE_F_ONE_B) {
    const int32_t warmup = warmup_passes(kind, shape, rank);
    const int32_t steady_end = warmup + 2 * (shape.microbatches - warmup);  // one past the last steady pass
    for (int32_t i = 0; i < n; ++i) {
      steps.push_back({i});
      // Batched only from a steady pass to the steady pass after it.
      batched.push_back(i >= warmup && i + 1 < steady_end);
    }
  } else {
    // A schedule file's lone recompute moves no tensor: it joins the step of
    // the pass before it, so that pass's sends still go out with the next
    // pass's receives, in one call after the recompute (forward_step, the
    // recompute, then send_forward_recv_backward, as a runtime that moves
    // recomputation ahead of the gradient's wait would order them).
    for (int32_t i = 0; i < n; ++i) {
      if (actions[i].pass == Pass::kRecompute && !steps.empty())
        steps.back().push_back(i);
      else
        steps.push_back({i});
    }
    batched.assign(steps.size(), true);
  }
  // The step lists must cover the actions in order (the schedule builder and
  // this grouping follow the same Megatron-LM warm-up counts).
  int32_t next = 0;
  for (const auto& step : steps)
    for (int32_t i : step)
      if (i != next++) throw InternalError("blocking_p2p_calls: schedule steps out of order (internal)");
  if (next != n) throw InternalError("blocking_p2p_calls: schedule steps do not cover the actions (internal)");
  if (kind == lacuna::scenario::INTERLEAVED_1F1B)
    for (size_t k = 0; k < steps.size(); ++k)
      if (steps[k].size() == 2 && (actions[steps[k][0]].pass != Pass::kForward ||
                                   actions[steps[k][1]].pass != Pass::kBackward))
        throw InternalError("blocking_p2p_calls: interleaved steady step is not (forward, backward) (internal)");

  std::vector<P2pCall> calls;
  if (!steps.empty()) add(calls, P2pCall{-1, {}, receives(steps.front())});
  for (size_t k = 0; k < steps.size(); ++k) {
    const int32_t after = steps[k].back();
    const std::vector<int32_t> out = sends(steps[k]);
    const std::vector<int32_t> in = k + 1 < steps.size() ? receives(steps[k + 1]) : std::vector<int32_t>{};
    if (batched[k]) {
      add(calls, P2pCall{after, out, in});
    } else {
      add(calls, P2pCall{after, out, {}});
      add(calls, P2pCall{after, {}, in});
    }
  }
  return calls;
}

}  // namespace lacuna::schedule
