#include "sim/network/link_variation.h"

#include <cmath>

#include "sim/core/counter_rng.h"
#include "sim/core/distributions.h"
#include "sim/core/error.h"

namespace lacuna::network {

LinkVariation::LinkVariation(const Topology& topology, const scenario::Variability& v)
    : topology_(topology), seed_(static_cast<uint64_t>(v.seed())), static_factor_(topology.num_links(), 1.0) {
  for (int i = 0; i < v.slow_links_size(); ++i) {
    const scenario::SlowLink& l = v.slow_links(i);
    const std::string field = "variability.slow_links[" + std::to_string(i) + "]";
    const int32_t node = static_cast<int32_t>(l.node());
    const int32_t index = static_cast<int32_t>(l.index());
    LinkId up = 0;
    if (node < 0 || node >= topology.num_nodes()) {
      throw Error(SourceLocation{{}, 0, 0, field + ".node"}, "node " + std::to_string(node) + " is not in the network");
    }
    if (l.port() == scenario::PORT_NIC) {
      if (index < 0 || index >= topology.nics_per_node()) {
        throw Error(SourceLocation{{}, 0, 0, field + ".index"}, "NIC " + std::to_string(index) + " is not in the network");
      }
      up = topology.nic_up(node, index);
    } else {
      if (index < 0 || index >= topology.gpus_per_node()) {
        throw Error(SourceLocation{{}, 0, 0, field + ".index"}, "GPU " + std::to_string(index) + " is not in the network");
      }
      up = topology.nvlink_up(node, index);
    }
    // Several entries on one link compound.
    if (l.direction() != scenario::LINK_DOWN) static_factor_[up] *= l.bandwidth_factor();
    if (l.direction() != scenario::LINK_UP) static_factor_[up + 1] *= l.bandwidth_factor();
  }
  const scenario::LinkFlaps& f = v.link_flaps();
  if (f.flaps_per_port_per_hour() > 0 && f.duration_s() > 0 && topology.nics_per_node() > 0) {
    rate_per_s_ = f.flaps_per_port_per_hour() / 3600.0;
    duration_s_ = f.duration_s();
    flap_factor_ = f.bandwidth_factor();
    nics_ = topology.nics_per_node();
    ports_.resize(static_cast<size_t>(topology.num_nodes()) * static_cast<size_t>(nics_));
  }
  reset();
}

// The time of the port's next change after its change at `now`: the end of
// the flap it is in, or the start of its next one (an exponential gap).
TimeNs LinkVariation::next_time(uint32_t port, TimeNs now) {
  Port& p = ports_[port];
  if (p.in_flap) {
    ++started_;
    const double d = duration_s_ * p.share;
    p.share = 1.0;
    return now + TimeNs::from_seconds(d);
  }
  const double u = uniform(RngKey{seed_, RngPurpose::kLinkFlap, port, 0, p.flap, 0});
  return now + TimeNs::from_seconds(std::min(exponential(u, 1.0 / rate_per_s_), 1e9));
}

void LinkVariation::reset() {
  heap_ = {};
  started_ = 0;
  if (rate_per_s_ <= 0) return;
  std::vector<Change> initial;
  initial.reserve(ports_.size());
  // Stationary start: a port is in a flap at t = 0 with probability
  // d / (d + mean gap), with a uniform share of the flap left.
  const double mean_gap = 1.0 / rate_per_s_;
  const double p_down = duration_s_ / (duration_s_ + mean_gap);
  for (uint32_t i = 0; i < ports_.size(); ++i) {
    ports_[i] = Port{};
    const UniformPair u = uniform_pair(RngKey{seed_, RngPurpose::kLinkFlap, i, 1, 0, 0});
    if (u.first < p_down) {
      // Report the down state at t = 0 as a change (so capacities follow).
      initial.push_back(Change{TimeNs::zero(), i});  // advance() flips it into the flap
      ports_[i].share = u.second;
      continue;
    }
    initial.push_back(Change{next_time(i, TimeNs::zero()), i});
  }
  heap_ = decltype(heap_)(std::greater<>{}, std::move(initial));
}

TimeNs LinkVariation::next_change() const { return heap_.empty() ? TimeNs(TimeNs::max()) : heap_.top().at; }

}  // namespace lacuna::network
