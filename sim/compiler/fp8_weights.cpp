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
  const int64_t w = fp8_rank_weights(in);
  if (w == 0) return Bytes(0);
  // One FP8 byte per copy the fprop / dgrad GEMMs read (fp8_weight_casts).
  const auto casts = model::fp8_weight_casts(in.shape.fp8, w, w);
  const int64_t copies = in.shape.fp8.param_gather ? static_cast<int64_t>(casts.size()) : casts.front().shape[1] - model::kBf16;
  return Bytes(w * copies - (in.shape.fp8.param_gather ? w * model::kBf16 : 0));
}

}  // namespace lacuna::compiler
