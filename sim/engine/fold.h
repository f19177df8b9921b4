// Which ranks the engine simulates, and whom each stands for.
//
// Full: every rank, each standing for itself.
// Fold: ranks with the same (class_id, compute_time_scale) behave identically
// when their groups are symmetric, so one representative per such equivalence
// class suffices: the lowest rank of the class. The set is then closed under the
// p2p peers the simulated ranks' ops actually use (a rendezvous needs both
// sides); for a Megatron layout this yields one pipeline (tp=0, cp=0, dp=0).
// Each non-simulated rank is represented by the lowest simulated rank of its
// equivalence class. Collectives wait only for the simulated members of their
// group: the others are identical and arrive at the same time.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/proto/program.pb.h"

namespace lacuna::engine {

struct SimulatedSet {
  std::vector<int32_t> ranks;                    // ascending
  std::vector<std::vector<int32_t>> represents;  // per entry of `ranks`, ascending, itself included
};

SimulatedSet plan_simulated_ranks(const ir::Program& program, bool fold);

}  // namespace lacuna::engine
