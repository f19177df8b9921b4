// MegatronMIMO's colocated three-phase schedule (docs/placements.md,
// "Colocated"), as actions: on a rank that holds both modules, encoder
// collectives need every member of a group at once while 1F1B staggers the
// LLM's ranks, so each encoder runs as a whole phase around the LLM's own
// schedule: (1) every encoder's forwards, (2) the LLM's actions, unchanged,
// (3) every encoder's backwards. An encoder with pp > 1 runs GPipe over its
// own stages on the same GPUs: its rank's line of GPipe, forwards in phase 1
// and backwards in phase 3.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/schedule/action.h"

namespace lacuna::schedule {

struct ColocatedEncoder {
  std::string module;        // the actions' module prefix (never empty)
  int32_t stages = 1;        // the encoder's pipeline stages
  int32_t stage = 0;         // the stage this rank holds
  int32_t microbatches = 1;  // the encoder's microbatches on this rank
  bool trains = true;        // whether this stage runs backwards (a frozen encoder's stages before the last do not)
};

// One rank's line: phase 1 the encoders' forwards (in the order given, each
// microbatch in order: GPipe's forward half on this stage), then `llm`, then
// phase 3 the encoders' backwards in the same order (GPipe's backward half:
// microbatches in order, as Megatron-LM's forward_backward_no_pipelining and
// GPipe run them). Full backwards (B). Throws lacuna::Error for an encoder
// without a module name, a stage outside its pipeline or no microbatch.
RankActions colocated_three_phase(const std::vector<ColocatedEncoder>& encoders, const RankActions& llm);

}  // namespace lacuna::schedule
