// Per-link totals over one run, fed every change of a link's load: bytes
// carried (the integral of load over time), peak load, time spent saturated.
#pragma once

#include <vector>

#include "sim/core/units.h"
#include "sim/network/link_observer.h"

namespace lacuna::network {

class LinkLedger {
 public:
  explicit LinkLedger(std::vector<double> capacity);
  void clear();
  // `link` carries `bytes_per_s` from `now` on.
  void update(TimeNs now, LinkId link, double bytes_per_s);
  // Takes back bytes counted while a finished activity still held the link.
  void discount(LinkId link, double bytes) { entries_[link].bytes -= bytes; }
  // Links that carried traffic, most bytes first (ties: lower LinkId first).
  std::vector<LinkStats> stats(TimeNs iteration_end) const;

  // A link counts as saturated at or above this fraction of its capacity.
  static constexpr double kSaturated = 0.99;

 private:
  struct Entry {
    double load = 0;
    TimeNs since;
    double bytes = 0;
    double peak = 0;  // bytes/s
    TimeNs saturated;
    bool used = false;
  };
  std::vector<double> capacity_;
  std::vector<Entry> entries_;
};

}  // namespace lacuna::network
