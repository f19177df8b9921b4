// Sums the traffic an algorithm puts on each link into one usage entry per
// link, then scales it (the protocol / algorithm efficiency factor).
#pragma once

#include <algorithm>
#include <vector>

#include "sim/network/fluid.h"
#include "sim/network/topology.h"

namespace lacuna::network {

class UsageBuilder {
 public:
  explicit UsageBuilder(size_t num_links) : coefficient_(num_links, 0.0) {}

  void add(LinkId link, double coefficient) {
    if (coefficient_[link] == 0.0) touched_.push_back(link);
    coefficient_[link] += coefficient;
  }

  // The largest coefficient / capacity over NVLink and NIC links: seconds per
  // byte of work on the busiest endpoint link, uncontended.
  double endpoint_seconds_per_byte(const Topology& topology) const {
    double worst = 0;
    for (LinkId l : touched_) {
      const LinkKind k = topology.links()[l].kind;
      if (k == LinkKind::kTrunkUp || k == LinkKind::kTrunkDown) continue;
      worst = std::max(worst, coefficient_[l] / topology.capacity(l));
    }
    return worst;
  }

  // One entry per link, ascending LinkId, coefficients × `scale`; resets.
  std::vector<Usage> take(double scale) {
    std::sort(touched_.begin(), touched_.end());
    std::vector<Usage> out;
    out.reserve(touched_.size());
    for (LinkId l : touched_) {
      out.push_back(Usage{l, coefficient_[l] * scale});
      coefficient_[l] = 0.0;
    }
    touched_.clear();
    return out;
  }

 private:
  std::vector<double> coefficient_;
  std::vector<LinkId> touched_;
};

}  // namespace lacuna::network
