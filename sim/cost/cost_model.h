// Cost hooks: how long a kernel, a collective or a transfer takes. The engine
// asks once per distinct op and caches, so implementations may be slow-ish but
// must be pure (same question → same answer). Later issues plug in calibration
// tables (compute) and a flow-level network (communication).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "sim/core/units.h"
#include "sim/proto/forward.h"

namespace lacuna::cost {

// How a communication group sits on the cluster.
struct GroupShape {
  int32_t size = 1;                // ranks in the group
  // "Node" here is an NVLink domain (docs/network.md#nvlink-domains): the
  // HGX node, or a whole NVL72 rack of trays; cost::shape_of_ranks maps them.
  int32_t nodes = 1;               // distinct NVLink domains they occupy
  int32_t max_ranks_per_node = 1;  // the most group members in one domain
  bool operator==(const GroupShape&) const = default;
};

class CostModel {
 public:
  virtual ~CostModel() = default;
  // Short description for reports, e.g. "analytic (roofline + NCCL ring/tree)".
  virtual std::string_view name() const = 0;
  // How kernels alone are timed, for reports in which something else (the
  // flow-level network) times communication.
  virtual std::string_view compute_name() const { return "roofline compute"; }
  virtual TimeNs compute(const ir::Compute& op) const = 0;
  virtual TimeNs collective(ir::CollectiveKind kind, int64_t bytes, const GroupShape& group) const = 0;
  virtual TimeNs p2p(int64_t bytes, bool same_node) const = 0;
};

// Roofline compute + NCCL-like ring/tree collectives over the node hierarchy.
std::unique_ptr<CostModel> make_analytic_cost_model(const scenario::Cluster& cluster,
                                                    scenario::Precision precision);

}  // namespace lacuna::cost
