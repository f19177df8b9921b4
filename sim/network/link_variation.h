// Slow and flapping links of the flow-level network (docs/variability.md#links):
// which links run below their bandwidth for the whole run, and when each NIC
// port goes down (or degrades) and comes back. Flaps are a Poisson process per
// port in simulated time, every draw keyed on (seed, port, flap index) in the
// counter RNG, so the schedule does not depend on traffic or event order.
#pragma once

#include <cstdint>
#include <queue>
#include <vector>

#include "sim/core/units.h"
#include "sim/network/topology.h"
#include "sim/proto/scenario.pb.h"

namespace lacuna::network {

class LinkVariation {
 public:
  // `variability` resolved and validated against the cluster; throws
  // lacuna::Error naming the field for a link the topology does not have.
  LinkVariation(const Topology& topology, const scenario::Variability& variability);

  // Capacity factor of each link for the whole run (slow links; 1 elsewhere).
  const std::vector<double>& static_factor() const { return static_factor_; }
  bool flaps() const { return rate_per_s_ > 0; }

  // Restarts the flap process at t = 0 (each run).
  void reset();
  // When the next port changes state; TimeNs::max() without flaps.
  TimeNs next_change() const;
  // Every port change due at `now`: calls f(link, factor) for both links of
  // the port, factor = static factor × (flap factor while down, else 1).
  template <class F>
  void advance(TimeNs now, F&& f) {
    while (!heap_.empty() && heap_.top().at <= now) {
      const Change c = heap_.top();
      heap_.pop();
      Port& p = ports_[c.port];
      p.in_flap = !p.in_flap;
      if (!p.in_flap) ++p.flap;
      const double flap = p.in_flap ? flap_factor_ : 1.0;
      const LinkId up = topology_.nic_up(static_cast<int32_t>(c.port / nics_), static_cast<int32_t>(c.port % nics_));
      f(up, static_factor_[up] * flap);
      f(up + 1, static_factor_[up + 1] * flap);
      heap_.push(Change{next_time(c.port, now), c.port});
    }
  }
  // Flaps begun so far in this run (for reports and tests).
  uint64_t flaps_started() const { return started_; }

 private:
  struct Port {
    bool in_flap = false;
    uint32_t flap = 0;  // index of the current or next flap
    double share = 1.0;  // of the duration left in the flap it enters (< 1 at t = 0)
  };
  struct Change {
    TimeNs at;
    uint32_t port = 0;
    // Earliest first; ties by port, so the order is fixed.
    bool operator>(const Change& o) const { return at != o.at ? at > o.at : port > o.port; }
  };
  TimeNs next_time(uint32_t port, TimeNs now);

  const Topology& topology_;
  uint64_t seed_ = 0;
  std::vector<double> static_factor_;
  double rate_per_s_ = 0;   // flaps per port per second
  double duration_s_ = 0;
  double flap_factor_ = 0;
  int32_t nics_ = 1;
  std::vector<Port> ports_;
  std::priority_queue<Change, std::vector<Change>, std::greater<>> heap_;
  uint64_t started_ = 0;
};

}  // namespace lacuna::network
