// The first cost model: roofline kernels and NCCL-like collectives on an idle
// network (no contention between concurrent transfers).
#include <memory>

#include "sim/cost/collective_model.h"
#include "sim/cost/cost_model.h"
#include "sim/cost/roofline.h"

namespace lacuna::cost {
namespace {

class AnalyticCostModel final : public CostModel {
 public:
  AnalyticCostModel(const scenario::Cluster& cluster, scenario::Precision precision)
      : roofline_(cluster.gpu(), precision), collectives_(interconnect_from(cluster)) {}

  std::string_view name() const override {
    return "analytic: roofline compute, NCCL-like ring/tree/NVLS collectives, no contention";
  }
  TimeNs compute(const ir::Compute& op) const override { return roofline_.time(op); }
  TimeNs collective(ir::CollectiveKind kind, int64_t bytes, const GroupShape& group) const override {
    return TimeNs::from_seconds(collectives_.collective_seconds(kind, bytes, group));
  }
  TimeNs p2p(int64_t bytes, bool same_node) const override {
    return TimeNs::from_seconds(collectives_.p2p_seconds(bytes, same_node));
  }

 private:
  RooflineModel roofline_;
  CollectiveModel collectives_;
};

}  // namespace

std::unique_ptr<CostModel> make_analytic_cost_model(const scenario::Cluster& cluster,
                                                    scenario::Precision precision) {
  return std::make_unique<AnalyticCostModel>(cluster, precision);
}

}  // namespace lacuna::cost
