// FP8 activation storage (docs/fp8.md#activation-memory): the saved GEMM
// inputs shrink by exactly the bytes the FP8 copies save.
#include <gtest/gtest.h>

#include "sim/cost/memory.h"

namespace lacuna::cost {
namespace {

LayerActivationInputs gpt3(int64_t tp, bool sp) {
  LayerActivationInputs in;
  in.seq_length = 2048;
  in.micro_batch = 1;
  in.hidden = 12288;
  in.num_heads = 96;
  in.num_kv_heads = 96;
  in.ffn_hidden = 4 * 12288;
  in.tp = tp;
  in.sequence_parallel = sp;
  return in;
}

TEST(Fp8ActivationMemory, SavesTheGemmInputsOneByteEach) {
  for (const int64_t tp : {1, 8}) {
    for (const bool sp : {false, true}) {
      LayerActivationInputs bf16 = gpt3(tp, sp && tp > 1);
      LayerActivationInputs fp8 = bf16;
      fp8.fp8_gemm_inputs = true;
      const int64_t sb = 2048, h = 12288, f = 4 * h;
      // Replicated region (÷ tp only with SP): QKV and FC1 inputs, 1 B each
      // saved per element; TP region: FC2's input −1 B·f, the projection's
      // FP8 copy +1 B·h.
      const int64_t replicated = 2 * sb * h / (bf16.sequence_parallel ? tp : 1);
      const int64_t split = sb * (f - h) / tp;
      EXPECT_EQ((layer_activation_bytes(bf16) - layer_activation_bytes(fp8)).count(), replicated + split)
          << "tp " << tp << " sp " << sp;
    }
  }
}

TEST(Fp8ActivationMemory, FullRecomputeKeepsOnlyTheLayerInput) {
  LayerActivationInputs bf16 = gpt3(8, true);
  bf16.recompute = scenario::RECOMPUTE_FULL;
  LayerActivationInputs fp8 = bf16;
  fp8.fp8_gemm_inputs = true;
  EXPECT_EQ(layer_activation_bytes(fp8), layer_activation_bytes(bf16));
}

}  // namespace
}  // namespace lacuna::cost
