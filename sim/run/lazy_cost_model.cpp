#include "sim/run/lazy_cost_model.h"

namespace lacuna::run {

const cost::CostModel& LazyAnalyticCostModel::model() const {
  // A failed build leaves model_ null, so a second question raises the error again.
  std::lock_guard lock(mutex_);
  if (model_ == nullptr) model_ = cost::make_analytic_cost_model(cluster_, precision_);
  return *model_;
}

std::string_view LazyAnalyticCostModel::name() const {
  try {
    return model().name();
  } catch (const std::exception&) {
    return "analytic (not buildable for this cluster; unused: every duration is fixed)";
  }
}

}  // namespace lacuna::run
