// Memoized communication costs: the cost model is asked once per distinct
// (kind, bytes, group shape) collective and once per distinct (bytes, same
// node) transfer. This is the engine's one place where communication time is
// decided; a flow-level network model would replace it (docs/engine.md).
#pragma once

#include <cstdint>
#include <unordered_map>

#include "sim/core/units.h"
#include "sim/cost/cost_model.h"

namespace lacuna::engine {

class CommCostCache {
 public:
  explicit CommCostCache(const cost::CostModel& cost) : cost_(cost) {}

  // Throw lacuna::Error if the cost model answers with a negative duration.
  TimeNs collective(ir::CollectiveKind kind, int64_t bytes, const cost::GroupShape& shape);
  TimeNs p2p(int64_t bytes, bool same_node);

 private:
  struct CollectiveKey {
    int32_t kind;
    int64_t bytes;
    cost::GroupShape shape;
    bool operator==(const CollectiveKey&) const = default;
  };
  struct CollectiveKeyHash {
    size_t operator()(const CollectiveKey& k) const;
  };

  const cost::CostModel& cost_;
  std::unordered_map<CollectiveKey, TimeNs, CollectiveKeyHash> collectives_;
  std::unordered_map<int64_t, TimeNs> p2p_same_node_;
  std::unordered_map<int64_t, TimeNs> p2p_cross_node_;
};

}  // namespace lacuna::engine
