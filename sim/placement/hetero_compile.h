// Heterogeneous placement, private: the two ways encoders join the LLM's
// compiled program (docs/placements.md, "Heterogeneous").
#pragma once

#include <array>
#include <string>

#include "sim/compiler/rank_layout.h"
#include "sim/placement/hetero_emit.h"
#include "sim/placement/hetero_plan.h"
#include "sim/proto/program.pb.h"
#include "sim/scenario/scenario.h"

namespace lacuna::placement::hetero {

// Colocated: the three-phase schedule on every LLM rank (encoder forward of
// all microbatches, the LLM's 1F1B, encoder backward), `program` being the
// LLM's compiled program.
void add_colocated_encoders(const scenario::LoadedScenario& scenario, const Plan& plan, ir::Program& program);

// Non-colocated: encoder islands after the LLM's ranks, graph-aware 1F1B,
// boundary leaders exchanging p2p messages with LLM stage 0.
void add_encoder_islands(const scenario::LoadedScenario& scenario, const Plan& plan, ir::Program& program);

// Binds `slot` on every rank of a module layout (global ranks first_rank +
// local) to the group of ranks sharing every coordinate whose `vary` entry
// (tp, cp, dp, pp) is false. Groups of one rank stay unbound (-1).
void bind_axis_groups(ir::Program& program, Groups& groups, const std::string& key, ir::GroupKind kind, int32_t slot,
                      const compiler::RankLayout& layout, int32_t first_rank, std::array<bool, 4> vary);

// Binds `next_slot` / `prev_slot` on every rank of a module layout (global
// ranks first_rank + local) to the rank of the same coordinates one pipeline
// stage later / earlier (none past the ends).
void bind_stage_peers(ir::Program& program, const compiler::RankLayout& layout, int32_t first_rank, int32_t next_slot,
                      int32_t prev_slot);

// Host copy of `bytes` over the host link (GB/s): whole nanoseconds, at least 1.
int64_t host_copy_ns(int64_t bytes, double gb_per_s);

// The compute stream's index, throwing if a class lacks one.
int32_t compute_stream(const ir::RankClass& rank_class);

// Drops streams without ops (created but unused).
void drop_empty_streams(ir::RankClass& rank_class);

// Encoder communication tags and channels on the boundary (distinct from the
// LLM's pipeline channels 0 and 1).
inline constexpr int32_t kBoundaryFwdChannel = 2;
inline constexpr int32_t kBoundaryBwdChannel = 3;
// A colocated encoder's own pipeline (pp > 1): its stages share GPUs with the
// LLM's and with other encoders' stages, so each encoder's p2p messages get
// channels of their own (the engine matches in order per src, dst, channel).
inline int32_t encoder_pp_channel(int32_t encoder_index, bool forward) {
  return 4 + 2 * encoder_index + (forward ? 0 : 1);
}
inline int64_t boundary_tag(int64_t direction, int64_t encoders, int64_t e, int64_t microbatches, int64_t mb) {
  return (direction * encoders + e) * microbatches + mb;
}

}  // namespace lacuna::placement::hetero
