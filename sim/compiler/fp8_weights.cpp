#include "sim/compiler/fp8_weights.h"

#include "sim/model/fp8.h"
#include "sim/model/kernels.h"

namespace lacuna::compiler {

int64_t fp8_rank_weights(const StageInputs& in) {
  if (!in.shape.fp8.linear()) return 0;
  int64_t w = 0;
  for (int32_t c = 0; c < in.pipeline.virtual_stages; ++c)
    for (const Segment& seg : stage_segments(in, schedule::virtual_stage(in.pipeline, in.pp_rank, c)))
      if (seg.module == 0) w += model::fp8_layers_weights(in.shape, seg.first, seg.count).total();
  return w;
}

Bytes fp8_weight_memory_delta(const StageInputs& in) {
  return Bytes(model::fp8_weight_memory_delta_bytes(in.shape.fp8, fp8_rank_weights(in)));
}

}  // namespace lacuna::compiler
