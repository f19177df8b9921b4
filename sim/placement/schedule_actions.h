// The action IR (sim/schedule/action.h) of a scenario's pipeline, whatever
// its placement: what `lacuna compile --dump-schedule` writes.
#pragma once

#include <string>
#include <vector>

#include "sim/scenario/scenario.h"
#include "sim/schedule/action.h"

namespace lacuna::placement {

// LLM-only scenarios: the built-in schedule's or the actions file's actions,
// under full recompute with each backward's recompute ("R&B" unless the
// file placed an R; schedule::add_recompute_actions).
// The Megatron-LM multimodal placements (MEGATRON_BASELINE, MEGATRON_BALANCED,
// MEGATRON_LAYER_SPLIT) run one pipeline over encoder and LLM stages: its
// actions, from the compiled program's schedule kind, pipeline size, model
// chunks and microbatches (a stage's passes carry its encoder layers too).
// Optimus, HETEROGENEOUS and MEGATRON_ENCODER_PP schedule their encoders
// apart from the LLM's pipeline: their compiled program is read back, one
// line per rank class (compiler::class_actions: every module's compute
// passes as the class runs them, Optimus's cuts as kernel ranges), and
// `lanes` (when given) gets what each line is ("class NAME: N ranks from
// rank R"); it stays empty for pipeline ranks. Each module's stages are its
// own (an encoder's stage within its pipeline).
// `with_p2p`: the pipeline's blocking sends and receives written out
// (schedule::lower_p2p; a CUSTOM file that writes them out, as written); a
// read-back program has its transfers on other streams, and `with_p2p` is
// refused for it. `with_dp`: the data-parallel actions (UNSHARD,
// REDUCE_GRAD) too, as schedule::add_dp_actions places them (a CUSTOM file
// that places them, as placed); refused for read-back programs likewise.
// `with_amax`: FP8 delayed scaling's amax reductions (AMAX) too, as
// schedule::add_amax_actions places them (a CUSTOM file that places them, as
// placed); refused for read-back programs and for a scenario whose FP8
// recipe reduces no amax.
schedule::ActionSchedule schedule_actions(const scenario::LoadedScenario& scenario, bool with_p2p = false,
                                          std::vector<std::string>* lanes = nullptr, bool with_dp = false,
                                          bool with_amax = false);

}  // namespace lacuna::placement
