// The FP8 amax pass over actions (docs/schedules.md#the-amax-pass): where
// FP8 delayed scaling's amax reductions run, one AMAX action per pass that
// runs one, and the reverse view the stage compiler reads, so that a
// schedule file can keep or drop each pass's reduction.
//
// Transformer Engine's delayed scaling reduces the amaxes of every FP8
// tensor the rank holds once per forward pass (as the outermost
// fp8_autocast exits) and once per backward pass (in the pass that runs the
// input gradient of the first FP8 module), a MAX all-reduce over the amax
// group followed by the history and scale update (docs/fp8.md,
// sim/model/fp8.h: what Megatron-Core and TE run). Weight-gradient passes
// (W) run none: a W computes no input gradient. Recomputes (R) run none in
// lacuna: the reductions of a recompute's replayed forward are not modelled
// (docs/fp8.md, "Not modelled").
#pragma once

#include <string>
#include <vector>

#include "sim/schedule/action.h"

namespace lacuna::schedule {

// Whether any rank lists an AMAX.
bool has_amax_actions(const ActionSchedule& s);

// `s` with an AMAX of its stage right after every LLM F, B and I (any AMAX
// it had is dropped first), ahead of the transfers that follow the pass: the
// reduction runs inside the pass, before its output is sent. An overlapped
// pair's (F&B, R&B) come after the pair, its forward's first.
ActionSchedule add_amax_actions(const ActionSchedule& s);

// Per pass of rank `rank` (to_schedule's order), whether it runs its amax
// reduction. A schedule without AMAX actions: every F, B and I does, when
// `reduces` (the scenario's FP8 recipe reduces amaxes: delayed scaling);
// none otherwise. With AMAX actions, exactly the passes an AMAX follows: an
// AMAX claims the latest F, B or I of its stage that has none, provided no
// other pass of the rank has started since (the partner of an overlapped
// pair aside; transfers and other collectives may come between). Throws
// lacuna::Error (file, rank, step, the action, the grid) for an AMAX that
// follows no such pass, or any AMAX when `reduces` is false.
std::vector<bool> amax_passes_of(const ActionSchedule& s, int32_t rank, bool reduces, const std::string& file);

}  // namespace lacuna::schedule
