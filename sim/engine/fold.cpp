#include "sim/engine/fold.h"

#include <map>
#include <utility>

#include "sim/ir/bound_program.h"

namespace lacuna::engine {
namespace {

// Peer slots that a class's send/recv ops use.
std::vector<std::vector<int32_t>> used_peer_slots(const ir::Program& program) {
  std::vector<std::vector<int32_t>> used(program.classes_size());
  for (int c = 0; c < program.classes_size(); ++c) {
    std::vector<bool> seen(program.peer_slots_size(), false);
    for (const auto& stream : program.classes(c).streams()) {
      for (const auto& op : stream.ops()) {
        int32_t slot = -1;
        if (op.has_send()) slot = op.send().peer_slot();
        if (op.has_recv()) slot = op.recv().peer_slot();
        if (slot >= 0 && slot < program.peer_slots_size() && !seen[slot]) {
          seen[slot] = true;
          used[c].push_back(slot);
        }
      }
    }
  }
  return used;
}

}  // namespace

SimulatedSet plan_simulated_ranks(const ir::Program& program, bool fold) {
  const int n = program.ranks_size();
  SimulatedSet out;
  if (!fold) {
    for (int r = 0; r < n; ++r) {
      out.ranks.push_back(r);
      out.represents.push_back({r});
    }
    return out;
  }
  // Equivalence class of each rank: index of its lowest member.
  std::map<std::pair<int32_t, double>, int32_t> first_of_class;
  std::vector<int32_t> representative(n);
  std::vector<bool> simulated(n, false);
  std::vector<int32_t> frontier;
  for (int r = 0; r < n; ++r) {
    const auto& b = program.ranks(r);
    const double scale = b.has_compute_time_scale() ? b.compute_time_scale() : 1.0;
    auto [it, inserted] = first_of_class.try_emplace({b.class_id(), scale}, r);
    representative[r] = it->second;
    if (inserted) {
      simulated[r] = true;
      frontier.push_back(r);
    }
  }
  const auto used = used_peer_slots(program);
  const ir::BoundProgram bound(program);
  while (!frontier.empty()) {
    const int32_t r = frontier.back();
    frontier.pop_back();
    for (int32_t slot : used[bound.class_id(r)]) {
      const int32_t peer = bound.peer(r, slot);
      if (peer >= 0 && peer < n && !simulated[peer]) {
        simulated[peer] = true;
        frontier.push_back(peer);
      }
    }
  }
  std::vector<int32_t> index_of(n, -1);
  for (int r = 0; r < n; ++r) {
    if (!simulated[r]) continue;
    index_of[r] = static_cast<int32_t>(out.ranks.size());
    out.ranks.push_back(r);
    out.represents.push_back({});
  }
  for (int r = 0; r < n; ++r) {
    const int32_t stand_in = simulated[r] ? r : representative[r];
    out.represents[index_of[stand_in]].push_back(r);
  }
  return out;
}

}  // namespace lacuna::engine
