#include "sim/report/formats/optimus_text.h"

#include <fmt/format.h>

#include "sim/report/formats/format.h"

namespace lacuna::report {

std::string optimus_deferral_text(const ir::OptimusInfo& o) {
  const std::string llm = fmt::format("LLM alone {} (Megatron-LM's warm-up counts: {})",
                                      format_duration(TimeNs(o.llm_only_iteration_ns())),
                                      format_duration(TimeNs(o.llm_megatron_iteration_ns())));
  if (o.deferrals_evaluated() == 0) return "not applicable (interleaved 1F1B only)";
  if (o.warmup_deferral() == 0)
    return fmt::format("none chosen ({} deferrals simulated, none estimated faster)", o.deferrals_evaluated());
  return fmt::format("d = {} fewer warm-up forwards upstream (of {} simulated); {}", o.warmup_deferral(),
                     o.deferrals_evaluated(), llm);
}

std::string optimus_bubble_profile_text(const ir::OptimusInfo& o) {
  const auto& b = o.bubble_profile();
  const double it = static_cast<double>(o.llm_only_iteration_ns());
  auto share = [&](int64_t ns) { return it > 0 ? format_percent(static_cast<double>(ns) / it) : std::string("—"); };
  return fmt::format("DP all-gather {} · PP warm-up {} · PP other {} · TP {} · PP cool-down {} · DP reduce-scatter {}",
                     share(b.dp_all_gather_ns()), share(b.pp_warmup_ns()), share(b.pp_other_ns()), share(b.tp_ns()),
                     share(b.pp_cooldown_ns()), share(b.dp_reduce_scatter_ns()));
}

}  // namespace lacuna::report
