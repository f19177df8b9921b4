// The p2p pass over actions (docs/schedules.md#the-p2p-pass): a schedule's
// compute actions with the pipeline's blocking sends and receives made
// explicit, and the reverse view the stage compiler reads.
//
// lower_p2p writes Megatron-LM's calls (blocking_p2p_calls, p2p_calls.h) as
// SEND_F / RECV_F / SEND_B / RECV_B actions after the compute action they
// follow, the actions of one batched call joined ("0SEND_F3+0RECV_B1"). As in
// PyTorch pipelining, SEND_x names the sending stage and RECV_x the receiving
// one. p2p_calls_of reads such a rank back into calls, so that a schedule a
// user writes with explicit sends and receives (PyTorch's lowered CSV) is
// compiled as written; p2p_calls_of(lower_p2p(s)) equals blocking_p2p_calls
// for every built-in schedule (tested).
#pragma once

#include <string>
#include <vector>

#include "sim/schedule/action.h"
#include "sim/schedule/p2p_calls.h"

namespace lacuna::schedule {

// Whether any rank lists a pipeline send or receive.
bool has_p2p_actions(const ActionSchedule& s);

// `s` (compute actions of the LLM; validated) with the calls of `rule`
// inserted. Data-parallel actions (lower_dp.h) stay where they were, after
// the calls of the pass they follow; other actions are dropped.
ActionSchedule lower_p2p(const ActionSchedule& s, lacuna::scenario::ScheduleKind rule, const PipelineShape& shape);

// The blocking calls of pipeline rank `rank` as its lowered actions list them,
// indices into the rank's compute passes (to_schedule's order). Throws
// lacuna::Error (file, rank, step, the action, the grid) when a pass that
// needs a receive has none before it or more than one, a send precedes the
// pass whose output it sends, or a send or receive names no pass of the rank.
std::vector<P2pCall> p2p_calls_of(const ActionSchedule& s, int32_t rank, const PipelineShape& shape,
                                  const std::string& file);

}  // namespace lacuna::schedule
