// One-line texts of an Optimus program's planner record (OptimusInfo), shared
// by `simulate`'s summary and `compare`'s table.
#pragma once

#include <string>

#include "sim/proto/program.pb.h"

namespace lacuna::report {

// "d = 4 of 14 simulated: LLM alone 2.071 s (Megatron-LM's warm-up 2.063 s)",
// or "none (…)" when d = 0.
std::string optimus_deferral_text(const ir::OptimusInfo& o);

// The LLM's bubbles the scheduler saw, as shares of the LLM-only iteration:
// "DP all-gather 0.3 % · PP warm-up 4.1 % · PP other 8.0 % · TP 9.9 % · PP cool-down 3.0 % · DP reduce-scatter 0.5 %".
std::string optimus_bubble_profile_text(const ir::OptimusInfo& o);

}  // namespace lacuna::report
