// Whether a schedule's blocking p2p calls can all complete
// (docs/schedules.md#blocking-calls-that-deadlock): a static check of the
// engine's rule before anything runs, so that a schedule file that would
// deadlock under execution.pipeline_p2p: P2P_BLOCKING is refused with the
// schedule's own rank, step and actions instead of the engine's blocked
// streams.
#pragma once

#include <string>
#include <vector>

#include "sim/schedule/action.h"
#include "sim/schedule/p2p_calls.h"

namespace lacuna::schedule {

// `calls[r]` are pipeline rank r's calls in order (indices into its compute
// passes, to_schedule's order of `s`). The engine's rule (docs/engine.md,
// send/recv): a transfer starts when both its sides have been reached and
// ends for both together; a rank stays at a call until every transfer of it
// has ended. Throws lacuna::Error (file, rank, step, the grid) naming every
// rank that can never leave its call and the transfer it waits for, when the
// ranks stop before all their calls are through. Transfers of one call on
// one stream also run one after the other in the engine; the check leaves
// that out, so what it refuses deadlocks for certain, and what it passes the
// engine still checks.
void check_blocking_calls(const ActionSchedule& s, const PipelineShape& shape,
                          const std::vector<std::vector<P2pCall>>& calls, const std::string& file);

}  // namespace lacuna::schedule
