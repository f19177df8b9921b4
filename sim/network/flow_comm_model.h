// The flow-level communication model (docs/network.md): the cluster's links
// (NVLink, NICs, switch trunks) built from the scenario's cluster, every
// collective decomposed into flows per NCCL algorithm step over them, and
// concurrent flows sharing links with max-min fairness, recomputed when a flow
// starts or ends. NCCL's algorithm and protocol are chosen by NCCL's own cost
// model unless cluster.network overrides them.
#pragma once

#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "sim/engine/communication_model.h"
#include "sim/network/fluid.h"
#include "sim/network/link_observer.h"
#include "sim/proto/program.pb.h"

namespace lacuna::network {

class FlowCommModel : public engine::CommunicationModel {
 public:
  // Builds the topology from program.cluster() (network presets applied) and
  // each rank's node and local GPU. Throws lacuna::Error naming the cluster
  // field for a bad or inconsistent network description. `program` must
  // outlive the model.
  explicit FlowCommModel(const ir::Program& program);
  // With slow and flapping links (docs/variability.md#links) from a resolved,
  // validated variability section; null or none set: as above. Not kept.
  FlowCommModel(const ir::Program& program, const scenario::Variability* variability);
  ~FlowCommModel() override;

  std::string_view name() const override;
  void reset() override;
  void begin_collective(TimeNs now, uint64_t token, int32_t group, ir::CollectiveKind kind, int64_t bytes) override;
  void begin_transfer(TimeNs now, uint64_t token, int32_t src_rank, int32_t dst_rank, int64_t bytes) override;
  void end(TimeNs now, uint64_t token) override;
  std::span<const engine::CompletionUpdate> take_updates() override;
  // A change left a component to re-solve (FluidNetwork::settle at the take).
  bool deferred() const override;
  bool uses_wakeups() const override;
  TimeNs next_wakeup() const override;
  void wakeup(TimeNs now) override;

  void add_link_observer(LinkObserver* observer);  // not owned
  const std::vector<LinkInfo>& links() const;
  // Links that carried traffic in the last run, busiest (most bytes) first.
  std::vector<LinkStats> link_stats(TimeNs iteration_end) const;
  // cluster.network.compute_slowdown_under_comm after presets (e.g. 0.1).
  double compute_slowdown_under_comm() const;

  // Added beyond the engine contract:
  // cluster.network after presets (tiers, overrides, slowdown).
  const scenario::NetworkSpec& network() const;
  // What the fluid solver did in the current run (for benchmarks and reports).
  const FluidNetwork::Counters& solver_counters() const;
  // Link flaps begun in the current run (0 without flaps).
  uint64_t flaps_started() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lacuna::network
