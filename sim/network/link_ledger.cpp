#include "sim/network/link_ledger.h"

#include <algorithm>

namespace lacuna::network {

LinkLedger::LinkLedger(std::vector<double> capacity) : capacity_(std::move(capacity)), entries_(capacity_.size()) {}

void LinkLedger::clear() { std::fill(entries_.begin(), entries_.end(), Entry{}); }

void LinkLedger::update(TimeNs now, LinkId link, double bytes_per_s) {
  Entry& e = entries_[link];
  if (now > e.since) {
    const TimeNs dt = now - e.since;
    e.bytes += e.load * dt.seconds();
    if (e.load >= kSaturated * capacity_[link]) e.saturated += dt;
  }
  e.since = now;
  e.load = bytes_per_s;
  e.peak = std::max(e.peak, bytes_per_s);
  e.used = e.used || bytes_per_s > 0;
}

std::vector<LinkStats> LinkLedger::stats(TimeNs iteration_end) const {
  std::vector<LinkStats> out;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    if (!e.used) continue;
    LinkStats s;
    s.link = static_cast<LinkId>(i);
    s.bytes = e.bytes;
    s.saturated = e.saturated;
    if (iteration_end > e.since) {  // still loaded at the end: count up to it
      const TimeNs dt = iteration_end - e.since;
      s.bytes += e.load * dt.seconds();
      if (e.load >= kSaturated * capacity_[i]) s.saturated += dt;
    }
    const double span = iteration_end.seconds();
    s.mean_utilisation = span > 0 ? s.bytes / (capacity_[i] * span) : 0.0;
    s.peak_utilisation = e.peak / capacity_[i];
    out.push_back(s);
  }
  std::stable_sort(out.begin(), out.end(), [](const LinkStats& a, const LinkStats& b) { return a.bytes > b.bytes; });
  return out;
}

}  // namespace lacuna::network
