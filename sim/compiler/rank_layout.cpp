#include "sim/compiler/rank_layout.h"

#include <algorithm>
#include <array>
#include <map>
#include <sstream>
#include <vector>

#include "sim/core/error.h"

namespace lacuna::compiler {
namespace {

constexpr std::array<const char*, 4> kAxisNames = {"tp", "cp", "dp", "pp"};

int32_t size_of(const ParallelDims& d, int32_t axis) {
  switch (axis) {
    case 0: return d.tp;
    case 1: return d.cp;
    case 2: return d.dp;
    default: return d.pp;
  }
}

int32_t get(const ir::Coordinates& c, int32_t axis) {
  switch (axis) {
    case 0: return c.tp();
    case 1: return c.cp();
    case 2: return c.dp();
    default: return c.pp();
  }
}

void set(ir::Coordinates& c, int32_t axis, int32_t v) {
  switch (axis) {
    case 0: c.set_tp(v); break;
    case 1: c.set_cp(v); break;
    case 2: c.set_dp(v); break;
    default: c.set_pp(v); break;
  }
}

}  // namespace

RankLayout::RankLayout(ParallelDims dims, const std::string& order) : dims_(dims) {
  const std::string text = order.empty() ? "tp-cp-dp-pp" : order;
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string p; std::getline(in, p, '-');) parts.push_back(p);
  std::array<bool, 4> seen{};
  bool ok = parts.size() == 4;
  for (size_t i = 0; ok && i < parts.size(); ++i) {
    int32_t axis = -1;
    for (int32_t a = 0; a < 4; ++a)
      if (parts[i] == kAxisNames[a]) axis = a;
    if (axis < 0 || seen[axis]) {
      ok = false;
      break;
    }
    seen[axis] = true;
    axis_of_position_[i] = axis;
  }
  if (!ok) {
    SourceLocation where;
    where.field = "parallel.rank_order";
    throw Error(where, "rank order \"" + text + "\" is not a permutation of tp, cp, dp, pp",
                "write the four names innermost first, separated by '-', e.g. \"tp-cp-dp-pp\"");
  }
}

int32_t RankLayout::rank(const ir::Coordinates& c) const {
  int32_t r = 0;
  for (int32_t i = 3; i >= 0; --i) {
    const int32_t axis = axis_of_position_[i];
    r = r * size_of(dims_, axis) + get(c, axis);
  }
  return r;
}

ir::Coordinates RankLayout::coordinates(int32_t rank) const {
  ir::Coordinates c;
  for (int32_t i = 0; i < 4; ++i) {
    const int32_t axis = axis_of_position_[i];
    set(c, axis, rank % size_of(dims_, axis));
    rank /= size_of(dims_, axis);
  }
  return c;
}

void add_rank_layout(const RankLayout& layout, int32_t gpus_per_node, ir::Program& program, bool world_grad_norm) {
  const ParallelDims& d = layout.dims();
  const int32_t world = d.world();
  program.clear_group_slots();
  program.clear_peer_slots();
  program.clear_groups();
  program.clear_ranks();
  const std::array<std::pair<const char*, ir::GroupKind>, kNumGroupSlots> group_slots = {
      {{"tp", ir::TP},
       {"cp", ir::CP},
       {"dp", ir::DP},
       {"dp_cp", ir::DP_CP},
       {"embedding", ir::EMBEDDING_GROUP},
       {"grad_norm", world_grad_norm ? ir::WORLD : ir::MODEL_PARALLEL}}};
  for (const auto& [name, kind] : group_slots) {
    auto* s = program.add_group_slots();
    s->set_name(name);
    s->set_kind(kind);
  }
  for (const char* name : {"pp_next", "pp_prev"}) program.add_peer_slots()->set_name(name);

  // Members of each rank's group per slot: the coordinates that vary within
  // the group, the others fixed. Keyed by member list alone, so each distinct
  // rank set is listed once, in order of first appearance (ascending lowest
  // rank), even when two slots cover it: dp_cp shares the DP group when cp = 1
  // and the CP group when dp = 1. A shared group takes the kind of the first
  // slot (tp, cp, dp, dp_cp order) that covers it: the narrowest name.
  auto varies = [](int32_t slot, int32_t axis) {
    switch (slot) {
      case kSlotTp: return axis == 0;
      case kSlotCp: return axis == 1;
      case kSlotDp: return axis == 2;
      default: return axis == 1 || axis == 2;  // dp_cp
    }
  };
  std::vector<ir::RankBinding> bindings(world);
  std::map<std::vector<int32_t>, int32_t> group_index;
  // Appends `members` (ascending) as a group unless it is listed already;
  // returns its index.
  auto group_of = [&](std::vector<int32_t> members, ir::GroupKind kind) {
    std::sort(members.begin(), members.end());
    auto it = group_index.find(members);
    if (it == group_index.end()) {
      it = group_index.emplace(members, program.groups_size()).first;
      auto* g = program.add_groups();
      g->set_kind(kind);
      for (int32_t m : members) g->add_ranks(m);
    }
    return it->second;
  };
  // Each rank names, per slot, the group of the ranks that share its fixed
  // coordinates. That group is enumerated once, by the first rank that names
  // it, and remembered under its canonical rank (the member whose varying
  // coordinates are all 0): enumerating it again for every member cost
  // O(ranks × group size), quadratic in the data-parallel size (262,144 GPUs
  // with dp 4,096 took 23 s, issue 17). -2: not seen yet.
  std::array<std::vector<int32_t>, kNumGroupSlots> memo;
  auto remembered = [&](int32_t slot, int32_t canonical) -> int32_t& {
    std::vector<int32_t>& m = memo[static_cast<size_t>(slot)];
    if (m.empty()) m.assign(static_cast<size_t>(world), -2);
    return m[static_cast<size_t>(canonical)];
  };
  // The world group is built once (every rank would otherwise enumerate it).
  int32_t world_group = -1;
  for (int32_t r = 0; r < world; ++r) {
    const ir::Coordinates c = layout.coordinates(r);
    ir::RankBinding& b = bindings[r];
    b.set_class_id(c.pp());
    b.set_node(r / gpus_per_node);
    b.set_local_gpu(r % gpus_per_node);
    *b.mutable_coord() = c;
    for (int32_t slot = 0; slot < kNumGroupSlots; ++slot) {
      if (slot == kSlotEmbedding) {
        // Stage 0 and the last stage exchange the tied embedding's gradient.
        const bool holds = d.pp > 1 && (c.pp() == 0 || c.pp() == d.pp - 1);
        if (!holds) {
          b.add_group(-1);
          continue;
        }
        ir::Coordinates first = c, last = c;
        first.set_pp(0);
        last.set_pp(d.pp - 1);
        int32_t& known = remembered(slot, layout.rank(first));
        if (known == -2) known = group_of({layout.rank(first), layout.rank(last)}, ir::EMBEDDING_GROUP);
        b.add_group(known);
        continue;
      }
      if (slot == kSlotGradNorm) {
        if (world <= 1 || (!world_grad_norm && d.tp * d.pp <= 1)) {
          b.add_group(-1);
          continue;
        }
        if (world_grad_norm) {
          if (world_group < 0) {
            std::vector<int32_t> all(static_cast<size_t>(world));
            for (int32_t m = 0; m < world; ++m) all[static_cast<size_t>(m)] = m;
            world_group = group_of(std::move(all), ir::WORLD);
          }
          b.add_group(world_group);
          continue;
        }
        ir::Coordinates canonical = c;
        canonical.set_tp(0);
        canonical.set_pp(0);
        int32_t& known = remembered(slot, layout.rank(canonical));
        if (known == -2) {
          std::vector<int32_t> members;
          for (int32_t pp = 0; pp < d.pp; ++pp)
            for (int32_t tp = 0; tp < d.tp; ++tp) {
              ir::Coordinates m = c;
              m.set_tp(tp);
              m.set_pp(pp);
              members.push_back(layout.rank(m));
            }
          known = group_of(std::move(members), ir::MODEL_PARALLEL);
        }
        b.add_group(known);
        continue;
      }
      const std::array<int32_t, 4> fixed = {c.tp(), c.cp(), c.dp(), c.pp()};
      ir::Coordinates canonical;
      canonical.set_tp(varies(slot, 0) ? 0 : fixed[0]);
      canonical.set_cp(varies(slot, 1) ? 0 : fixed[1]);
      canonical.set_dp(varies(slot, 2) ? 0 : fixed[2]);
      canonical.set_pp(fixed[3]);
      int32_t& known = remembered(slot, layout.rank(canonical));
      if (known == -2) {
        std::vector<int32_t> members;
        // Enumerate the varying axes (at most cp × dp members).
        for (int32_t cp = 0; cp < (varies(slot, 1) ? d.cp : 1); ++cp)
          for (int32_t dp = 0; dp < (varies(slot, 2) ? d.dp : 1); ++dp)
            for (int32_t tp = 0; tp < (varies(slot, 0) ? d.tp : 1); ++tp) {
              ir::Coordinates m;
              m.set_tp(varies(slot, 0) ? tp : fixed[0]);
              m.set_cp(varies(slot, 1) ? cp : fixed[1]);
              m.set_dp(varies(slot, 2) ? dp : fixed[2]);
              m.set_pp(fixed[3]);
              members.push_back(layout.rank(m));
            }
        known = members.size() <= 1 ? -1 : group_of(std::move(members), group_slots[slot].second);
      }
      b.add_group(known);
    }
    if (d.pp > 1) {
      ir::Coordinates next = c, prev = c;
      next.set_pp((c.pp() + 1) % d.pp);
      prev.set_pp((c.pp() + d.pp - 1) % d.pp);
      b.add_peer(layout.rank(next));
      b.add_peer(layout.rank(prev));
    } else {
      b.add_peer(-1);
      b.add_peer(-1);
    }
  }
  for (auto& b : bindings) *program.add_ranks() = std::move(b);
}

}  // namespace lacuna::compiler

namespace lacuna::compiler {

namespace {

// The MoE slots kSlotEp … kSlotEpInterDomain, in slot order.
void add_moe_slots(ir::Program& program) {
  const std::array<std::pair<const char*, ir::GroupKind>, kNumMoeGroupSlots - kNumGroupSlots> slots = {
      {{"ep", ir::EP},
       {"expert_tp", ir::EXPERT_TP},
       {"expert_dp", ir::EXPERT_DP},
       {"ep_intra_domain", ir::EP_INTRA_DOMAIN},
       {"ep_inter_domain", ir::EP_INTER_DOMAIN}}};
  for (const auto& [name, kind] : slots) {
    auto* s = program.add_group_slots();
    s->set_name(name);
    s->set_kind(kind);
  }
}

// The MoE slots of a dense program, bound to no group on every rank, so that
// the slots after them keep their fixed indices.
void add_unbound_moe_slots(ir::Program& program) {
  add_moe_slots(program);
  for (ir::RankBinding& b : *program.mutable_ranks())
    for (int32_t slot = kNumGroupSlots; slot < kNumMoeGroupSlots; ++slot) b.add_group(-1);
}

}  // namespace

void add_expert_layout(const RankLayout& layout, const ExpertDims& e, ir::Program& program) {
  const ParallelDims& d = layout.dims();
  const int32_t world = d.world();
  const int32_t stage = d.tp * d.cp * d.dp;
  const int32_t etp = e.expert_tp, ep = e.ep, edp = stage / (etp * ep);
  add_moe_slots(program);
  // Index of a rank inside its pipeline stage: its dense coordinates in the
  // dense order with pp left out (Megatron's generators agree on the pp
  // groups, parallel_state.py asserts it).
  auto local_of = [&](const ir::Coordinates& c) { return (c.dp() * d.cp + c.cp()) * d.tp + c.tp(); };
  std::vector<int32_t> rank_of_local(static_cast<size_t>(stage) * d.pp);
  for (int32_t r = 0; r < world; ++r) {
    const ir::Coordinates c = layout.coordinates(r);
    rank_of_local[static_cast<size_t>(c.pp()) * stage + local_of(c)] = r;
  }
  // Each MoE group is listed once per kind, even where its ranks equal a
  // dense group (ep = dp): consumers (the engine's load imbalance) find the
  // EP groups by GroupKind.
  std::map<std::pair<ir::GroupKind, std::vector<int32_t>>, int32_t> index;
  auto group_of = [&](std::vector<int32_t> members, ir::GroupKind kind) -> int32_t {
    if (members.size() <= 1) return -1;
    std::sort(members.begin(), members.end());
    auto key = std::make_pair(kind, members);
    auto it = index.find(key);
    if (it != index.end()) return it->second;
    const int32_t g = program.groups_size();
    auto* grp = program.add_groups();
    grp->set_kind(kind);
    for (int32_t m : members) grp->add_ranks(m);
    index.emplace(std::move(key), g);
    return g;
  };
  const int32_t domain = std::max(e.domain_gpus, 1);
  std::vector<int32_t> ep_memo, tp_memo, dp_memo;
  for (int32_t r = 0; r < world; ++r) {
    const ir::Coordinates c = program.ranks(r).coord();
    const int32_t local = local_of(c);
    const int32_t t = local % etp, x = (local / etp) % ep, y = local / (etp * ep);
    auto at = [&](int32_t tt, int32_t xx, int32_t yy) {
      return rank_of_local[static_cast<size_t>(c.pp()) * stage + (yy * ep + xx) * etp + tt];
    };
    // Each group is enumerated once, by its canonical member (index 0 along
    // the varying axis), as add_rank_layout does: enumerating expert DP for
    // every rank would be quadratic in its size.
    std::vector<int32_t> ep_members;
    for (int32_t i = 0; i < ep; ++i) ep_members.push_back(at(t, i, y));
    auto memo_group = [&](std::vector<int32_t>& memo, int32_t canonical, int32_t n, auto member, ir::GroupKind kind) {
      if (memo.empty()) memo.assign(static_cast<size_t>(world), -2);
      int32_t& known = memo[static_cast<size_t>(canonical)];
      if (known == -2) {
        std::vector<int32_t> m;
        for (int32_t i = 0; i < n; ++i) m.push_back(member(i));
        known = group_of(std::move(m), kind);
      }
      return known;
    };
    // Hierarchical: the EP members in this rank's NVLink domain, and the
    // members holding this rank's position (its index among its domain's
    // members) in every domain.
    std::map<int32_t, std::vector<int32_t>> by_domain;
    for (int32_t m : ep_members) by_domain[m / domain].push_back(m);
    const auto& mine = by_domain[r / domain];
    const int32_t position = static_cast<int32_t>(std::find(mine.begin(), mine.end(), r) - mine.begin());
    std::vector<int32_t> inter;
    for (const auto& [dom, members] : by_domain)
      if (position < static_cast<int32_t>(members.size())) inter.push_back(members[static_cast<size_t>(position)]);
    auto* b = program.mutable_ranks(r);
    b->add_group(memo_group(ep_memo, at(t, 0, y), ep, [&](int32_t i) { return at(t, i, y); }, ir::EP));
    b->add_group(memo_group(tp_memo, at(0, x, y), etp, [&](int32_t i) { return at(i, x, y); }, ir::EXPERT_TP));
    b->add_group(memo_group(dp_memo, at(t, x, 0), edp, [&](int32_t i) { return at(t, x, i); }, ir::EXPERT_DP));
    b->add_group(group_of(mine, ir::EP_INTRA_DOMAIN));
    b->add_group(group_of(inter, ir::EP_INTER_DOMAIN));
  }
}

void add_amax_layout(const RankLayout& layout, ir::Program& program, bool tp_only) {
  const ParallelDims& d = layout.dims();
  const int32_t world = d.world();
  if (program.group_slots_size() == kNumGroupSlots) add_unbound_moe_slots(program);
  if (program.group_slots_size() != kSlotAmax)
    throw InternalError("add_amax_layout: expected " + std::to_string(kSlotAmax) + " group slots, found " +
                        std::to_string(program.group_slots_size()));
  auto* s = program.add_group_slots();
  s->set_name("amax");
  s->set_kind(ir::AMAX_REDUCTION);
  // One group per pipeline stage (per stage and dp replica when tp_only):
  // listed even where it equals another kind's group (pp = 1: the world), as
  // the MoE groups are: readers find the amax groups by kind.
  const int32_t size = d.tp * d.cp * (tp_only ? 1 : d.dp);
  const int32_t replicas = tp_only ? d.dp : 1;
  auto key = [&](const ir::Coordinates& c) { return c.pp() * replicas + (tp_only ? c.dp() : 0); };
  std::vector<int32_t> group_of_key(static_cast<size_t>(d.pp) * replicas, -1);
  if (size > 1) {
    std::vector<std::vector<int32_t>> members(group_of_key.size());
    for (int32_t r = 0; r < world; ++r) members[static_cast<size_t>(key(layout.coordinates(r)))].push_back(r);
    for (size_t k = 0; k < members.size(); ++k) {
      group_of_key[k] = program.groups_size();
      auto* g = program.add_groups();
      g->set_kind(ir::AMAX_REDUCTION);
      for (int32_t m : members[k]) g->add_ranks(m);  // ascending
    }
  }
  for (int32_t r = 0; r < world; ++r)
    program.mutable_ranks(r)->add_group(group_of_key[static_cast<size_t>(key(program.ranks(r).coord()))]);
}

void add_mirror_layout(const RankLayout& layout, ir::Program& program) {
  const ParallelDims& d = layout.dims();
  const int32_t world = d.world();
  if (program.group_slots_size() == kNumGroupSlots) add_unbound_moe_slots(program);
  if (program.group_slots_size() == kSlotAmax) {  // no FP8 amax groups: the slot, bound to none
    auto* s = program.add_group_slots();
    s->set_name("amax");
    s->set_kind(ir::AMAX_REDUCTION);
    for (ir::RankBinding& b : *program.mutable_ranks()) b.add_group(-1);
  }
  if (program.group_slots_size() != kSlotPpMirror)
    throw InternalError("add_mirror_layout: expected " + std::to_string(kSlotPpMirror) + " group slots, found " +
                        std::to_string(program.group_slots_size()));
  auto* s = program.add_group_slots();
  s->set_name("pp_mirror");
  s->set_kind(ir::PP_MIRROR);
  // Each pair listed once, by its lower rank, in rank order.
  std::vector<int32_t> group_of_rank(static_cast<size_t>(world), -1);
  for (int32_t r = 0; r < world; ++r) {
    ir::Coordinates c = layout.coordinates(r);
    c.set_pp(d.pp - 1 - c.pp());
    const int32_t mirror = layout.rank(c);
    if (mirror == r || group_of_rank[static_cast<size_t>(r)] >= 0) continue;
    const int32_t g = program.groups_size();
    auto* group = program.add_groups();
    group->set_kind(ir::PP_MIRROR);
    group->add_ranks(std::min(r, mirror));
    group->add_ranks(std::max(r, mirror));
    group_of_rank[static_cast<size_t>(r)] = group_of_rank[static_cast<size_t>(mirror)] = g;
  }
  for (int32_t r = 0; r < world; ++r) program.mutable_ranks(r)->add_group(group_of_rank[static_cast<size_t>(r)]);
}

}  // namespace lacuna::compiler
