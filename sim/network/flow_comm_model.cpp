#include "sim/network/flow_comm_model.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "sim/core/error.h"
#include "sim/network/collective_flows.h"
#include "sim/network/flat_map.h"
#include "sim/network/link_ledger.h"
#include "sim/network/link_variation.h"
#include "sim/network/network_presets.h"
#include "sim/network/topology.h"

namespace lacuna::network {
namespace {

// Link capacities, slow links' factors applied.
std::vector<double> capacities(const Topology& t, const LinkVariation* variation) {
  std::vector<double> out;
  out.reserve(t.num_links());
  for (const LinkInfo& l : t.links()) out.push_back(l.capacity_bytes_per_s);
  if (variation != nullptr) {
    for (size_t i = 0; i < out.size(); ++i) out[i] *= variation->static_factor()[i];
  }
  return out;
}

std::unique_ptr<LinkVariation> variation_of(const Topology& t, const scenario::Variability* v) {
  if (v == nullptr || !(v->slow_links_size() > 0 || (v->link_flaps().flaps_per_port_per_hour() > 0 &&
                                                      v->link_flaps().duration_s() > 0))) {
    return nullptr;
  }
  return std::make_unique<LinkVariation>(t, *v);
}

}  // namespace

struct FlowCommModel::Impl {
  // One operation in flight: a collective or transfer the engine began.
  struct Op {
    uint64_t token = 0;
    bool has_flow = false;
    FlowId flow = 0;
    TimeNs latency;  // added after the fluid part
  };

  Impl(const ir::Program& p, const scenario::Variability* v)
      : network(resolve_network(p.cluster())),
        topology(p.cluster(), network),
        variation(variation_of(topology, v)),
        plan(p, topology, network),
        fluid(capacities(topology, variation.get()), topology.binding_flags()),
        ledger(capacities(topology, variation.get())),
        load_mark(topology.num_links(), 0) {
    description = "flow-level network: max-min fair links (NVLink, NICs, " + std::to_string(network.tiers_size()) +
                  (network.tiers_size() == 1 ? " switch tier" : " switch tiers") +
                  "), NCCL ring/tree/NVLS by NCCL's tuner";
  }

  void announce_links() {
    if (announced) return;
    announced = true;
    for (LinkObserver* o : observers) o->on_links(topology.links());
  }

  // Observers get one batch per timestamp, in LinkId order, once the time has
  // moved on (or the network went idle).
  void flush_link_events() {
    if (pending_links.empty()) return;
    std::sort(pending_links.begin(), pending_links.end());
    for (LinkId l : pending_links) {
      for (LinkObserver* o : observers) o->on_link_load(pending_time, l, fluid.load(l));
    }
    pending_links.clear();
    ++load_epoch;
  }

  void before_call(TimeNs now) {
    announce_links();
    if (now != pending_time) {
      flush_link_events();
      pending_time = now;
    }
  }

  // Passes what the fluid network reported since the last call on: new
  // finishes become updates, link loads go to the ledger and observers (at
  // once, so that link statistics are right whenever they are read). Rates are
  // re-solved only by settle(), at the engine's take.
  void after_fluid_change(TimeNs now) {
    for (FlowId id : fluid.rescheduled()) {
      const Op& op = ops[op_of_flow[id]];
      updates.push_back(engine::CompletionUpdate{op.token, fluid.finish(id) + op.latency});
    }
    for (const FluidNetwork::Overhang& o : fluid.overhangs()) {
      for (const Usage& u : o.usage) ledger.discount(u.link, u.coefficient * o.rate * o.held.seconds());
    }
    for (LinkId l : fluid.changed_links()) {
      ledger.update(now, l, fluid.load(l));
      if (!observers.empty() && load_mark[l] != load_epoch) {
        load_mark[l] = load_epoch;
        pending_links.push_back(l);
      }
    }
    if (fluid.active_flows() == 0) flush_link_events();
    fluid.clear_reports();
  }

  uint32_t new_op(uint64_t token) {
    if (op_index.find(token) != FlatMap::kMissing) {
      throw Error("flow-level network: token " + std::to_string(token) + " begun twice without an end");
    }
    uint32_t index;
    if (!free_ops.empty()) {
      index = free_ops.back();
      free_ops.pop_back();
    } else {
      index = static_cast<uint32_t>(ops.size());
      ops.emplace_back();
    }
    ops[index] = Op{token, false, 0, TimeNs::zero()};
    op_index.put(token, index);
    return index;
  }

  void start_flow(TimeNs now, uint32_t op, double work, std::span<const Usage> usage, TimeNs latency) {
    ops[op].has_flow = true;
    ops[op].latency = latency;
    const FlowId id = fluid.add(now, work, usage);
    ops[op].flow = id;
    if (op_of_flow.size() <= id) op_of_flow.resize(static_cast<size_t>(id) + 1, 0);
    op_of_flow[id] = op;
    after_fluid_change(now);
  }

  scenario::NetworkSpec network;
  Topology topology;
  std::unique_ptr<LinkVariation> variation;  // null: every link as built
  CollectiveFlows plan;
  FluidNetwork fluid;
  LinkLedger ledger;
  std::string description;
  std::vector<LinkObserver*> observers;
  bool announced = false;

  std::vector<Op> ops;
  std::vector<uint32_t> free_ops;
  FlatMap op_index;                 // token → ops index
  std::vector<uint32_t> op_of_flow;  // FlowId → ops index
  std::vector<engine::CompletionUpdate> updates;
  std::vector<engine::CompletionUpdate> taken;

  TimeNs pending_time;
  std::vector<LinkId> pending_links;
  std::vector<uint32_t> load_mark;
  uint32_t load_epoch = 1;
};

FlowCommModel::FlowCommModel(const ir::Program& program) : impl_(std::make_unique<Impl>(program, nullptr)) {}
FlowCommModel::FlowCommModel(const ir::Program& program, const scenario::Variability* variability)
    : impl_(std::make_unique<Impl>(program, variability)) {}
FlowCommModel::~FlowCommModel() = default;

std::string_view FlowCommModel::name() const { return impl_->description; }

void FlowCommModel::reset() {
  Impl& m = *impl_;
  m.fluid.clear();
  m.ledger.clear();
  m.ops.clear();
  m.free_ops.clear();
  m.op_index.clear();
  m.updates.clear();
  m.taken.clear();
  m.pending_links.clear();
  m.pending_time = TimeNs::zero();
  ++m.load_epoch;
  m.announced = false;
  m.announce_links();
  if (m.variation != nullptr && m.variation->flaps()) {
    // Links a flap left changed in the last run come back to their own
    // capacity before the flap process restarts.
    const auto& factor = m.variation->static_factor();
    for (size_t l = 0; l < m.topology.num_links(); ++l) {
      const double cap = m.topology.links()[l].capacity_bytes_per_s * factor[l];
      if (m.fluid.capacity(static_cast<LinkId>(l)) != cap) m.fluid.set_capacity(TimeNs::zero(), static_cast<LinkId>(l), cap);
    }
    m.variation->reset();
  }
}

bool FlowCommModel::deferred() const { return impl_->fluid.unsettled(); }

bool FlowCommModel::uses_wakeups() const { return impl_->variation != nullptr && impl_->variation->flaps(); }

TimeNs FlowCommModel::next_wakeup() const {
  return uses_wakeups() ? impl_->variation->next_change() : TimeNs::max();
}

void FlowCommModel::wakeup(TimeNs now) {
  Impl& m = *impl_;
  if (m.variation == nullptr) return;
  m.before_call(now);
  m.variation->advance(now, [&](LinkId link, double factor) {
    m.fluid.set_capacity(now, link, m.topology.links()[link].capacity_bytes_per_s * factor);
  });
  m.after_fluid_change(now);
}

uint64_t FlowCommModel::flaps_started() const {
  return impl_->variation != nullptr ? impl_->variation->flaps_started() : 0;
}

void FlowCommModel::begin_collective(TimeNs now, uint64_t token, int32_t group, ir::CollectiveKind kind,
                                     int64_t bytes) {
  Impl& m = *impl_;
  m.before_call(now);
  if (bytes < 0) throw Error("collective of negative size " + std::to_string(bytes) + " bytes");
  const cost::GroupShape& shape = m.plan.shape(group);
  const uint32_t op = m.new_op(token);
  if (shape.size < 2 || bytes == 0) {  // nothing moves
    m.updates.push_back(engine::CompletionUpdate{token, now});
    return;
  }
  const cost::Candidate chosen = m.plan.choose(group, kind, bytes);
  const std::span<const Usage> usage = m.plan.collective_usage(group, kind, chosen);
  m.start_flow(now, op, static_cast<double>(bytes), usage, TimeNs::from_seconds(chosen.latency_s));
}

void FlowCommModel::begin_transfer(TimeNs now, uint64_t token, int32_t src_rank, int32_t dst_rank, int64_t bytes) {
  Impl& m = *impl_;
  m.before_call(now);
  if (bytes < 0) throw Error("transfer of negative size " + std::to_string(bytes) + " bytes");
  const uint32_t op = m.new_op(token);
  if (bytes == 0 || src_rank == dst_rank) {
    m.updates.push_back(engine::CompletionUpdate{token, now});
    return;
  }
  const CollectiveFlows::Transfer t = m.plan.transfer(src_rank, dst_rank);
  m.start_flow(now, op, static_cast<double>(bytes), t.usage, TimeNs::from_seconds(t.latency_s));
}

void FlowCommModel::end(TimeNs now, uint64_t token) {
  Impl& m = *impl_;
  m.before_call(now);
  const uint32_t op = m.op_index.find(token);
  if (op == FlatMap::kMissing) {
    throw Error("flow-level network: end of token " + std::to_string(token) + ", which was never begun");
  }
  m.op_index.erase(token);
  m.free_ops.push_back(op);
  if (!m.ops[op].has_flow) return;
  m.fluid.remove(now, m.ops[op].flow);
  m.after_fluid_change(now);
}

std::span<const engine::CompletionUpdate> FlowCommModel::take_updates() {
  Impl& m = *impl_;
  // The batch of changes at this time is in: one solve for all of them.
  if (m.fluid.unsettled()) {
    m.fluid.settle(m.pending_time);
    m.after_fluid_change(m.pending_time);
  }
  m.taken.swap(m.updates);
  m.updates.clear();
  return m.taken;
}

void FlowCommModel::add_link_observer(LinkObserver* observer) { impl_->observers.push_back(observer); }

const std::vector<LinkInfo>& FlowCommModel::links() const { return impl_->topology.links(); }

std::vector<LinkStats> FlowCommModel::link_stats(TimeNs iteration_end) const {
  return impl_->ledger.stats(iteration_end);
}

double FlowCommModel::compute_slowdown_under_comm() const { return impl_->network.compute_slowdown_under_comm(); }

const scenario::NetworkSpec& FlowCommModel::network() const { return impl_->network; }

const FluidNetwork::Counters& FlowCommModel::solver_counters() const { return impl_->fluid.counters(); }

}  // namespace lacuna::network
