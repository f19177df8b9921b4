// Graph-aware 1F1B of a module's own pipeline feeding another (MegatronMIMO's
// non-colocated encoder islands, docs/placements.md, "Graph-aware 1F1B"),
// as actions: the module graph expanded into pipeline-stage nodes, each
// stage running 1F1B with a warm-up of its distance to the sink, extended
// where the downstream node consumes further ahead before it returns a
// gradient.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/schedule/action.h"

namespace lacuna::schedule {

struct GraphAwareInput {
  int32_t stages = 1;           // the module's pipeline stages (one rank each in the result)
  int32_t sink_distance = 1;    // stages from the module's last stage to the sink (the LLM's pp)
  // Per microbatch i: forwards the downstream node consumes before it
  // returns i's gradient (the LLM stage 0's chunk-0 forwards before that
  // backward); its size is the microbatch count.
  std::vector<int32_t> downstream_need;
  // Per stage: whether it runs backwards (a frozen encoder's stages before
  // the last run forwards only).
  std::vector<bool> trains;
  std::string module;           // the actions' module prefix
};

// One line per stage j: with backward, microbatch i's backward comes after
// min(m, max(warmup + i + 1, need_j[i])) forwards, warmup = min(distance_j, m)
// and distance_j = (stages − 1 − j) + sink_distance, need_last the
// downstream's and need_j that of stage j + 1 (the forwards it ran before
// each backward); without, the m forwards in order. Full backwards (B).
// Throws lacuna::Error for sizes that do not match.
ActionSchedule graph_aware_1f1b(const GraphAwareInput& in);

}  // namespace lacuna::schedule
