// training.fp8 against the precision and the GPU (docs/fp8.md#validation).
#include "sim/scenario/checks.h"

namespace lacuna::scenario {

void validate_fp8(const Scenario& spec, const Checker& c) {
  const auto& t = spec.training();
  if (!t.has_fp8()) return;
  const Fp8& f = t.fp8();
  if (t.precision() != FP8) {
    c.fail("training.fp8",
           "FP8 settings given but training.precision is " + Precision_Name(t.precision()) +
               " (they apply only to FP8 training)",
           "set precision: FP8, or remove the fp8 block");
    return;
  }
  c.enumeration_or_unset("training.fp8.recipe", f.recipe());
  const auto& g = spec.cluster().gpu();
  const std::string gpu = g.name().empty() ? std::string("the GPU") : "GPU \"" + g.name() + "\"";
  if (f.recipe() == FP8_MXFP8 && !g.mx_formats()) {
    // TE quantization.py _compute_mxfp8_support: compute capability 10.x only.
    c.fail("training.fp8.recipe",
           "FP8_MXFP8 needs tensor cores with OCP MX formats (Blackwell); " + gpu +
               " has none (cluster.gpu.mx_formats is not set)",
           "use FP8_DELAYED, FP8_CURRENT or FP8_BLOCKWISE, or a Blackwell GPU");
    return;
  }
  if (f.has_amax_history_len()) {
    const Fp8Recipe r = f.recipe() == FP8_RECIPE_UNSPECIFIED ? FP8_DELAYED : f.recipe();
    if (r != FP8_DELAYED) {
      c.fail("training.fp8.amax_history_len",
             "only delayed scaling keeps an amax history; the recipe is " + Fp8Recipe_Name(r),
             "remove amax_history_len or use recipe: FP8_DELAYED");
      return;
    }
    if (f.amax_history_len() < 1 || f.amax_history_len() > 1'000'000) {
      c.fail("training.fp8.amax_history_len",
             "must be in [1, 1000000], got " + std::to_string(f.amax_history_len()),
             "Megatron's default is 1 (--fp8-amax-history-len)");
      return;
    }
  }
  if (f.has_tp_only_amax_reduction() && f.tp_only_amax_reduction() &&
      (f.recipe() == FP8_RECIPE_UNSPECIFIED ? FP8_DELAYED : f.recipe()) != FP8_DELAYED) {
    // Only delayed scaling reduces amaxes over a group at the autocast's exit
    // (TE quantization.py reduce_and_update_fp8_tensors).
    c.fail("training.fp8.tp_only_amax_reduction",
           "only delayed scaling reduces amaxes over the amax group; the recipe is " + Fp8Recipe_Name(f.recipe()),
           "remove tp_only_amax_reduction or use recipe: FP8_DELAYED");
    return;
  }
  if (f.has_param_gather() && f.param_gather() && !spec.parallel().distributed_optimizer()) {
    // megatron/training/arguments.py: "--fp8-param-gather only supported with
    // distributed optimizer, torch fsdp2, megatron fsdp, or inference mode".
    c.fail("training.fp8.param_gather", "FP8 parameter all-gather needs the distributed optimizer",
           "set parallel.distributed_optimizer: true, or param_gather: false");
  }
}

}  // namespace lacuna::scenario
