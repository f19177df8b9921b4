// Which layers each virtual pipeline stage holds.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/scenario/scenario.h"

namespace lacuna::compiler {

struct LayerRange {
  int64_t first = 0;  // global index of the first layer
  int64_t count = 0;
};

// One range per virtual stage (pp × virtual_stages, in pipeline order),
// contiguous and covering every layer: parallel.layers_per_stage when given,
// else an even split. Throws lacuna::Error when neither works.
std::vector<LayerRange> plan_stages(const scenario::LoadedScenario& scenario);

// DualPipe's bidirectional layout (schedule.h, StageLayout::kBidirectional):
// one range per virtual stage (2·pp), each the even split of the model over
// pp stages, virtual stage k holding model stage k mod pp (both pipelines
// hold the whole model). Throws lacuna::Error, naming the field, for
// layers_per_stage or an uneven first or last stage (written for 2·pp
// stages of one pipeline).
std::vector<LayerRange> plan_mirrored_stages(const scenario::LoadedScenario& scenario);

}  // namespace lacuna::compiler
