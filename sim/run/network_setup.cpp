#include "sim/run/network_setup.h"

#include "sim/core/error.h"
#include "sim/network/network_presets.h"
#include "sim/scenario/variability.h"

namespace lacuna::run {

// ---------------------------------------------------------------- LazyFlowCommModel

network::FlowCommModel& LazyFlowCommModel::model() const {
  if (!model_) {
    auto built = std::make_unique<network::FlowCommModel>(program_, variability_);
    for (network::LinkObserver* o : observers_) built->add_link_observer(o);
    model_ = std::move(built);
  }
  return *model_;
}

std::string_view LazyFlowCommModel::name() const {
  return model_ ? model_->name() : "flow-level network (not built: no communication needed it)";
}

void LazyFlowCommModel::reset() {
  if (model_) model_->reset();
}

void LazyFlowCommModel::begin_collective(TimeNs now, uint64_t token, int32_t group, ir::CollectiveKind kind,
                                         int64_t bytes) {
  model().begin_collective(now, token, group, kind, bytes);
}

void LazyFlowCommModel::begin_transfer(TimeNs now, uint64_t token, int32_t src_rank, int32_t dst_rank,
                                       int64_t bytes) {
  model().begin_transfer(now, token, src_rank, dst_rank, bytes);
}

void LazyFlowCommModel::end(TimeNs now, uint64_t token) { model().end(now, token); }

std::span<const engine::CompletionUpdate> LazyFlowCommModel::take_updates() { return model().take_updates(); }

// Flaps need the network from the start (a port may go down before any
// operation): the model is built at the first question about them.
bool LazyFlowCommModel::uses_wakeups() const {
  return variability_ != nullptr && scenario::any_link_flaps(*variability_);
}

TimeNs LazyFlowCommModel::next_wakeup() const { return uses_wakeups() ? model().next_wakeup() : TimeNs::max(); }

void LazyFlowCommModel::wakeup(TimeNs now) { model().wakeup(now); }

void LazyFlowCommModel::add_link_observer(network::LinkObserver* observer) {
  observers_.push_back(observer);
  if (model_) model_->add_link_observer(observer);
}

// ---------------------------------------------------------------- NetworkSetup

NetworkSetup::NetworkSetup(const ir::Program& program, NetworkMode mode) : NetworkSetup(program, mode, false) {}

NetworkSetup::NetworkSetup(const ir::Program& program, NetworkMode mode, bool with_variability) {
  const bool links = with_variability && scenario::any_link_variability(program.variability());
  if (mode != NetworkMode::kFlow) {
    if (links) {
      throw Error(SourceLocation{"‹network analytic›", 0, 0, {}},
                  "slow and flapping links need the flow-level network: the analytic model times each collective "
                  "by a closed form with no per-link state (docs/variability.md#links)",
                  "use ‹network flow› (the default), or drop the links (‹ideal›, or remove them from "
                  "variability)");
    }
    return;
  }
  slowdown_ = network::resolve_network(program.cluster()).compute_slowdown_under_comm();
  lazy_ = std::make_unique<LazyFlowCommModel>(program, links ? &program.variability() : nullptr);
}

engine::SimulationOptions NetworkSetup::apply(engine::SimulationOptions options) const {
  if (lazy_) {
    options.communication = lazy_.get();
    options.compute_slowdown_under_comm = slowdown_;
  }
  return options;
}

std::string NetworkSetup::describe(const cost::CostModel& cost) const {
  if (!lazy_) return std::string(cost.name());
  return std::string(cost.compute_name()) + "; " + std::string(lazy_->name());
}

}  // namespace lacuna::run
