// The recompute one module runs with: Megatron-LM's --recompute-granularity
// and, for full recompute, --recompute-method block --recompute-num-layers
// (docs/compiler.md, "Memory deltas"). Planners raise it per module to fit
// HBM (docs/memory-model.md#feasibility).
#pragma once

#include <cstdint>

#include "sim/proto/scenario.pb.h"

namespace lacuna::compiler {

struct ModuleRecompute {
  scenario::Recompute mode = scenario::RECOMPUTE_NONE;
  // RECOMPUTE_FULL only: the first num_layers layers of each model chunk
  // recompute; 0 every layer.
  int64_t num_layers = 0;
  bool operator==(const ModuleRecompute&) const = default;
};

}  // namespace lacuna::compiler
