// The communication side of one run (sim/run/): which model times
// collectives and transfers (`--network flow|analytic`), and the description
// of it that reports print (so every output says which one ran).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sim/cost/cost_model.h"
#include "sim/engine/simulator.h"
#include "sim/network/flow_comm_model.h"
#include "sim/proto/program.pb.h"

namespace lacuna::run {

enum class NetworkMode { kFlow, kAnalytic };

// The flow-level network, built at the first collective or transfer that needs
// it, like LazyAnalyticCostModel: a program whose communication is all fixed
// durations (synthetic, replayed) runs even when its cluster lacks the link
// specs; a program that needs them gets the model's own error at that point.
class LazyFlowCommModel : public engine::CommunicationModel {
 public:
  // `variability`: slow and flapping links (null: none); must outlive the model.
  explicit LazyFlowCommModel(const ir::Program& program, const scenario::Variability* variability = nullptr)
      : program_(program), variability_(variability) {}

  std::string_view name() const override;
  void reset() override;
  void begin_collective(TimeNs now, uint64_t token, int32_t group, ir::CollectiveKind kind, int64_t bytes) override;
  void begin_transfer(TimeNs now, uint64_t token, int32_t src_rank, int32_t dst_rank, int64_t bytes) override;
  void end(TimeNs now, uint64_t token) override;
  std::span<const engine::CompletionUpdate> take_updates() override;
  bool deferred() const override { return model_ != nullptr && model_->deferred(); }
  bool uses_wakeups() const override;
  TimeNs next_wakeup() const override;
  void wakeup(TimeNs now) override;

  void add_link_observer(network::LinkObserver* observer);
  // Null until something needed the network.
  network::FlowCommModel* built() const { return model_.get(); }

 private:
  network::FlowCommModel& model() const;

  const ir::Program& program_;
  const scenario::Variability* variability_ = nullptr;
  mutable std::unique_ptr<network::FlowCommModel> model_;
  std::vector<network::LinkObserver*> observers_;
};

// The communication side of one simulation. In analytic mode the CostModel
// times communication alone.
class NetworkSetup {
 public:
  // Flow mode resolves cluster.network now (a bad preset or field fails
  // before the run); the links are built lazily.
  NetworkSetup(const ir::Program& program, NetworkMode mode);
  // With the program's slow and flapping links (program.variability()):
  // --network analytic then refuses them (it has no per-link state).
  NetworkSetup(const ir::Program& program, NetworkMode mode, bool with_variability);
  // `options` with the communication model and interference set.
  engine::SimulationOptions apply(engine::SimulationOptions options) const;
  // For reports: the compute model and the network that timed communication.
  std::string describe(const cost::CostModel& cost) const;
  // The flow model, once built (null in analytic mode or when unused).
  network::FlowCommModel* flow() const { return lazy_ ? lazy_->built() : nullptr; }
  void add_link_observer(network::LinkObserver* observer) {
    if (lazy_) lazy_->add_link_observer(observer);
  }

 private:
  std::unique_ptr<LazyFlowCommModel> lazy_;
  double slowdown_ = 0;
};

}  // namespace lacuna::run
