// The action IR (sim/schedule/action.h) of a scenario's pipeline, whatever
// its placement: what `lacuna compile --dump-schedule` writes.
#pragma once

#include "sim/scenario/scenario.h"
#include "sim/schedule/action.h"

namespace lacuna::placement {

// LLM-only scenarios: the built-in schedule's or the actions file's actions.
// The Megatron-LM multimodal placements (MEGATRON_BASELINE, MEGATRON_BALANCED,
// MEGATRON_LAYER_SPLIT) run one pipeline over encoder and LLM stages: its
// actions, from the compiled program's schedule kind, pipeline size, model
// chunks and microbatches (a stage's passes carry its encoder layers too).
// Optimus, the heterogeneous placements and MEGATRON_ENCODER_PP schedule in
// their own representations, not yet actions: a lacuna::Error says so.
// `with_p2p`: the pipeline's blocking sends and receives written out
// (schedule::lower_p2p; a CUSTOM file that writes them out, as written).
schedule::ActionSchedule schedule_actions(const scenario::LoadedScenario& scenario, bool with_p2p = false);

}  // namespace lacuna::placement
