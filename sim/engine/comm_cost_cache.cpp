#include "sim/engine/comm_cost_cache.h"

#include <string>

#include "sim/core/error.h"
#include "sim/engine/flat_program.h"

namespace lacuna::engine {
namespace {

size_t mix(size_t h, uint64_t v) {
  // splitmix64 finaliser: cheap and spreads small integers well.
  v += 0x9e3779b97f4a7c15ULL + h;
  v = (v ^ (v >> 30)) * 0xbf58476d1ce4e5b9ULL;
  v = (v ^ (v >> 27)) * 0x94d049bb133111ebULL;
  return static_cast<size_t>(v ^ (v >> 31));
}

TimeNs checked(TimeNs t, const cost::CostModel& cost, const std::string& what) {
  if (t < TimeNs::zero()) {
    throw Error("cost model '" + std::string(cost.name()) + "' returned a negative duration (" +
                std::to_string(t.count()) + " ns) for " + what);
  }
  return t;
}

}  // namespace

size_t CommCostCache::CollectiveKeyHash::operator()(const CollectiveKey& k) const {
  size_t h = mix(0, static_cast<uint64_t>(k.kind));
  h = mix(h, static_cast<uint64_t>(k.bytes));
  h = mix(h, static_cast<uint64_t>(k.shape.size));
  h = mix(h, static_cast<uint64_t>(k.shape.nodes));
  return mix(h, static_cast<uint64_t>(k.shape.max_ranks_per_node));
}

TimeNs CommCostCache::collective(ir::CollectiveKind kind, int64_t bytes, const cost::GroupShape& shape) {
  const CollectiveKey key{static_cast<int32_t>(kind), bytes, shape};
  auto it = collectives_.find(key);
  if (it != collectives_.end()) return it->second;
  const TimeNs t = checked(cost_.collective(kind, bytes, shape), cost_,
                           collective_name(kind) + " of " + std::to_string(bytes) + " bytes over " +
                               std::to_string(shape.size) + " ranks on " + std::to_string(shape.nodes) + " nodes");
  collectives_.emplace(key, t);
  return t;
}

TimeNs CommCostCache::p2p(int64_t bytes, bool same_node) {
  auto& memo = same_node ? p2p_same_node_ : p2p_cross_node_;
  auto it = memo.find(bytes);
  if (it != memo.end()) return it->second;
  const TimeNs t = checked(cost_.p2p(bytes, same_node), cost_,
                           "a transfer of " + std::to_string(bytes) + " bytes" + (same_node ? " within a node" : " between nodes"));
  memo.emplace(bytes, t);
  return t;
}

}  // namespace lacuna::engine
