// Which work of a layer runs in FP8 (Transformer Engine under Megatron-Core),
// resolved from training.fp8 and the GPU; docs/fp8.md. Kept apart from
// fp8.h so that LayerShape can carry it without the pass's dependencies.
#pragma once

#include "sim/proto/scenario.pb.h"

namespace lacuna::model {

struct Fp8Plan {
  // FP8_RECIPE_UNSPECIFIED: not an FP8 program (every kernel as in BF16).
  scenario::Fp8Recipe recipe = scenario::FP8_RECIPE_UNSPECIFIED;
  bool fprop = false, dgrad = false, wgrad = false;  // the linear layers' three GEMMs
  bool attention = false;                            // FP8 dot-product attention
  bool param_gather = false;                         // FP8 weights, all-gathered in FP8
  bool activation_storage = false;                   // FP8 copies saved for backward
  // FP8 GEMMs in any operand layout (Blackwell, sm100: TE's
  // is_non_tn_fp8_gemm_supported); Hopper runs only TN, so a tensor used by
  // two GEMMs in both orientations needs a transposed FP8 copy.
  bool non_tn_gemm = false;
  // Delayed scaling: amax history rows, and whether amaxes are reduced over
  // tp × cp only instead of tp × cp × dp (fp8.h, fp8_delayed_amax_reduction).
  int64_t amax_history_len = 0;
  bool tp_only_amax_reduction = false;

  bool linear() const { return recipe != scenario::FP8_RECIPE_UNSPECIFIED && (fprop || dgrad || wgrad); }
  bool any() const { return linear() || (recipe != scenario::FP8_RECIPE_UNSPECIFIED && attention); }
};

}  // namespace lacuna::model
