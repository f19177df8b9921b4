// The encoder layout of Megatron-LM's encoder pipeline (placement
// MEGATRON_ENCODER_PP; docs/placements.md): the encoder's own tensor and
// pipeline sizes, its ranks sharing the LLM's data and context parallelism
// (megatron/core/parallel_state.py `initialize_model_parallel`,
// core_v0.9.0 – core_v0.13.1: world = dp · (encoder tp·pp·cp + tp·pp·cp)).
#pragma once

#include <cstdint>
#include <string>

#include "sim/proto/scenario.pb.h"

namespace lacuna::scenario {

struct EncoderPipelineDims {
  int64_t tp = 1;  // --encoder-tensor-model-parallel-size
  int64_t pp = 1;  // --encoder-pipeline-model-parallel-size
  int64_t cp = 1;  // the LLM's (context_parallel_size is one for both)
  int64_t dp = 1;  // the LLM's (data_parallel_size = world / total model size)
  // Where tp and pp come from, for errors: "model.encoders[0].layout.tp" when
  // the encoder's layout gives it, else "parallel.tp" (the default, as
  // Megatron's: encoder tp 0 means the decoder's) / "placement.kind" (pp 1).
  std::string tp_field, pp_field;
  int64_t world() const { return tp * pp * cp * dp; }
};

// Encoder 0's dims: tp and pp from model.encoders[0].layout when it has one,
// else tp = parallel.tp and pp = 1; cp and dp always the LLM's (a layout that
// says otherwise is refused by placement::encoder_pp_scenario).
EncoderPipelineDims megatron_encoder_pp_dims(const Scenario& spec);

}  // namespace lacuna::scenario
