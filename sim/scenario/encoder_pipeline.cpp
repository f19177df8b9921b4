#include "sim/scenario/encoder_pipeline.h"

#include <algorithm>

namespace lacuna::scenario {

EncoderPipelineDims megatron_encoder_pp_dims(const Scenario& spec) {
  const auto& par = spec.parallel();
  EncoderPipelineDims d;
  d.cp = std::max<int64_t>(1, par.cp());
  d.dp = std::max<int64_t>(1, par.dp());
  d.tp = std::max<int64_t>(1, par.tp());
  d.tp_field = "parallel.tp";
  d.pp_field = "placement.kind";
  if (spec.model().encoders_size() > 0 && spec.model().encoders(0).has_layout()) {
    const auto& l = spec.model().encoders(0).layout();
    if (l.tp() > 0) {
      d.tp = l.tp();
      d.tp_field = "model.encoders[0].layout.tp";
    }
    if (l.pp() > 0) {
      d.pp = l.pp();
      d.pp_field = "model.encoders[0].layout.pp";
    }
  }
  return d;
}

}  // namespace lacuna::scenario
