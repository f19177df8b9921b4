// `lacuna ablate` as a library (docs/results.md#ablation): the scenario as
// written, then once with each execution switch (and hardware-model
// mechanism) flipped. Each variant is a scenario of its own, validated like a
// file: a combination Megatron-LM rejects is reported as such instead of
// simulated. Rows come in a fixed order for any thread count.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "sim/report/observers/bubble_accounting.h"
#include "sim/run/network_setup.h"
#include "sim/scenario/scenario.h"

namespace lacuna::run {

struct AblationOutcome {
  std::string name, flag;  // the variant, and the Megatron-LM flag or lacuna field it toggles
  bool applies = true;     // false: the switch does not exist for this scenario
  std::string problem;     // the variant is invalid: why
  double seconds = 0;
  double mfu = 0;
  std::array<int64_t, report::kNumBubbles> bubbles_ns{};  // medians over ranks
  bool multimodal = false;
  bool moe = false;  // the MoE bubble categories (docs/moe.md#load-imbalance)
};

// Row 0 is the scenario as written ("as written"); then one row per switch.
std::vector<AblationOutcome> run_ablation(const scenario::LoadedScenario& base, NetworkMode mode, bool fold,
                                          int jobs);

// The two bubble categories whose median moved most against `base`, with
// their change ("pp_warmup +1.2 ms, dp_exposed −0.4 ms"), or "—".
std::string moved_bubbles(const AblationOutcome& base, const AblationOutcome& v);

}  // namespace lacuna::run
