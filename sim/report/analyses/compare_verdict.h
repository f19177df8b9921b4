// `lacuna compare`'s verdict line (docs/compare.md, "The verdict"): which
// placement that fits HBM is best and by how much over the runner-up, which
// heterogeneous mode wins, and what limits the non-colocated one (its encoder
// islands or the LLM, from the two sides' idle shares).
#pragma once

#include <optional>
#include <string>

#include "sim/report/analyses/compare_report.h"

namespace lacuna::report {

// Mean idle fraction of the island ranks (outside module 0's rank set) and of
// the LLM's ranks: Σ idle / (ranks · T), fold weights counted (a simulated
// rank weighs as many ranks as it stands for). nullopt without island ranks.
struct IdleShares {
  double island = 0;
  double llm = 0;
};
std::optional<IdleShares> island_idle_shares(const Summary& summary);

// One sentence; "" when nothing simulated.
std::string comparison_verdict(const Comparison& comparison);

}  // namespace lacuna::report
