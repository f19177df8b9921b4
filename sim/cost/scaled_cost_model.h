// A cost model that times one compute op class `factor` times as long as
// another model does (0.9: 10 % faster), everything else unchanged: the
// re-simulation behind "what if GEMMs were 10 % faster"
// (docs/critical-path.md#sensitivity). Durations are rounded to the nearest ns.
#pragma once

#include <cmath>
#include <string_view>

#include "sim/core/error.h"
#include "sim/cost/cost_model.h"

namespace lacuna::cost {

class ScaledCostModel : public CostModel {
 public:
  // `inner` must outlive this model. `factor` in (0, 1e6].
  ScaledCostModel(const CostModel& inner, ir::OpClass op_class, double factor)
      : inner_(inner), op_class_(op_class), factor_(factor) {
    if (!(factor > 0 && factor <= 1e6)) throw Error("ScaledCostModel: factor must be in (0, 1e6]");
  }
  std::string_view name() const override { return inner_.name(); }
  std::string_view compute_name() const override { return inner_.compute_name(); }
  TimeNs compute(const ir::Compute& op) const override {
    const TimeNs t = inner_.compute(op);
    if (op.op_class() != op_class_) return t;
    return TimeNs(std::llround(static_cast<double>(t.count()) * factor_));
  }
  TimeNs collective(ir::CollectiveKind kind, int64_t bytes, const GroupShape& group) const override {
    return inner_.collective(kind, bytes, group);
  }
  TimeNs p2p(int64_t bytes, bool same_node) const override { return inner_.p2p(bytes, same_node); }

 private:
  const CostModel& inner_;
  ir::OpClass op_class_;
  double factor_;
};

}  // namespace lacuna::cost
