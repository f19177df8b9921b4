// The analytic cost model, built on first use. A program whose durations are
// all fixed (synthetic programs, replayed measurements) then runs even when its
// cluster lacks the GPU or link specs the analytic model needs; a program that
// does need them gets the model's own error at the first question.
#pragma once

#include <memory>
#include <mutex>

#include "sim/cost/cost_model.h"
#include "sim/proto/scenario.pb.h"

namespace lacuna::run {

class LazyAnalyticCostModel : public cost::CostModel {
 public:
  LazyAnalyticCostModel(const scenario::Cluster& cluster, scenario::Precision precision)
      : cluster_(cluster), precision_(precision) {}

  std::string_view name() const override;
  TimeNs compute(const ir::Compute& op) const override { return model().compute(op); }
  TimeNs collective(ir::CollectiveKind kind, int64_t bytes, const cost::GroupShape& group) const override {
    return model().collective(kind, bytes, group);
  }
  TimeNs p2p(int64_t bytes, bool same_node) const override { return model().p2p(bytes, same_node); }

 private:
  const cost::CostModel& model() const;

  scenario::Cluster cluster_;
  scenario::Precision precision_;
  mutable std::mutex mutex_;
  mutable std::unique_ptr<cost::CostModel> model_;
};

}  // namespace lacuna::run
