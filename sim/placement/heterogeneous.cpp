// Heterogeneous parallelism (MegatronMIMO): the LLM's compiled program plus
// the encoders in their own layouts, colocated or on islands
// (docs/placements.md, "Heterogeneous").
#include "sim/placement/heterogeneous.h"

#include <cmath>

#include "sim/compiler/compile.h"
#include "sim/core/error.h"
#include "sim/placement/hetero_compile.h"
#include "sim/placement/modules.h"

namespace lacuna::placement {

namespace hetero {

void bind_stage_peers(ir::Program& program, const compiler::RankLayout& layout, int32_t first_rank, int32_t next_slot,
                      int32_t prev_slot) {
  const int32_t last = layout.dims().pp - 1;
  for (int32_t l = 0; l < layout.dims().world(); ++l) {
    const ir::Coordinates c = layout.coordinates(l);
    ir::Coordinates next = c, prev = c;
    next.set_pp(c.pp() + 1);
    prev.set_pp(c.pp() - 1);
    ir::RankBinding* b = program.mutable_ranks(first_rank + l);
    if (c.pp() < last) b->set_peer(next_slot, first_rank + layout.rank(next));
    if (c.pp() > 0) b->set_peer(prev_slot, first_rank + layout.rank(prev));
  }
}

void bind_axis_groups(ir::Program& program, Groups& groups, const std::string& key, ir::GroupKind kind, int32_t slot,
                      const compiler::RankLayout& layout, int32_t first_rank, std::array<bool, 4> vary) {
  const compiler::ParallelDims& d = layout.dims();
  const int32_t n = d.world();
  std::vector<bool> done(static_cast<size_t>(n), false);
  const std::array<int32_t, 4> size = {d.tp, d.cp, d.dp, d.pp};
  for (int32_t l = 0; l < n; ++l) {
    if (done[static_cast<size_t>(l)]) continue;
    const ir::Coordinates c = layout.coordinates(l);
    const std::array<int32_t, 4> fixed = {c.tp(), c.cp(), c.dp(), c.pp()};
    // Every combination of the varying axes, the others at this rank's.
    std::vector<int32_t> members;
    std::array<int32_t, 4> at = fixed;
    for (int32_t a = 0; a < 4; ++a)
      if (vary[static_cast<size_t>(a)]) at[static_cast<size_t>(a)] = 0;
    while (true) {
      ir::Coordinates m;
      m.set_tp(at[0]);
      m.set_cp(at[1]);
      m.set_dp(at[2]);
      m.set_pp(at[3]);
      members.push_back(layout.rank(m));
      int32_t a = 0;
      for (; a < 4; ++a) {
        if (!vary[static_cast<size_t>(a)]) continue;
        if (++at[static_cast<size_t>(a)] < size[static_cast<size_t>(a)]) break;
        at[static_cast<size_t>(a)] = 0;
      }
      if (a == 4) break;
    }
    std::vector<int32_t> global;
    for (int32_t r : members) global.push_back(first_rank + r);
    const int32_t g = groups.get(key, kind, global);
    for (int32_t r : members) {
      done[static_cast<size_t>(r)] = true;
      program.mutable_ranks(first_rank + r)->set_group(slot, g);
    }
  }
}

int64_t host_copy_ns(int64_t bytes, double gb_per_s) {
  // bytes / (GB/s) = bytes / (gb_per_s · 1e9) s = bytes / gb_per_s ns.
  return std::max<int64_t>(1, std::llround(static_cast<double>(bytes) / gb_per_s));
}

int32_t compute_stream(const ir::RankClass& rank_class) {
  for (int32_t i = 0; i < rank_class.streams_size(); ++i)
    if (rank_class.streams(i).kind() == ir::COMPUTE) return i;
  throw InternalError("heterogeneous placement: internal error, class " + rank_class.name() + " has no compute stream");
}

void drop_empty_streams(ir::RankClass& rank_class) {
  // Ops name events, never stream indices, so streams can be removed.
  auto* streams = rank_class.mutable_streams();
  for (int32_t i = streams->size() - 1; i >= 0; --i)
    if (streams->Get(i).ops_size() == 0) streams->DeleteSubrange(i, 1);
}

}  // namespace hetero

ir::Program compile_heterogeneous(const scenario::LoadedScenario& scenario, const cost::CostModel& cost) {
  // The schedules are static (three phases, graph-aware 1F1B); durations are
  // the engine's business, so the cost model is not consulted.
  (void)cost;
  const hetero::Plan plan = hetero::make_plan(scenario);
  ir::Program program = compiler::compile(llm_only(scenario));
  if (plan.colocated)
    hetero::add_colocated_encoders(scenario, plan, program);
  else
    hetero::add_encoder_islands(scenario, plan, program);
  std::vector<scenario::ModuleLayout> layouts;
  for (const auto& enc : plan.encoders) layouts.push_back(enc.layout);
  auto* info = program.mutable_info();
  add_multimodal_info(scenario.spec, scenario::HETEROGENEOUS, layouts, program);
  info->set_num_ranks(plan.total_ranks);
  return program;
}

}  // namespace lacuna::placement
