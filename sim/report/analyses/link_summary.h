// The busiest links of the flow-level network over one iteration, for the
// summary table and the JSON. Built from what FlowCommModel reports
// (links() and link_stats()); the analytic cost model has no links.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/units.h"
#include "sim/network/link_observer.h"

namespace lacuna::report {

struct LinkRow {
  network::LinkId link = 0;
  std::string name;                 // LinkInfo.name
  network::LinkKind kind = network::LinkKind::kNvlinkUp;
  double capacity_bytes_per_s = 0;
  double bytes = 0;                 // carried over the iteration
  double mean_utilisation = 0;      // fraction: bytes / (capacity × iteration time)
  double peak_utilisation = 0;      // fraction: highest load / capacity
  TimeNs saturated;                 // time at ≥ 99 % of capacity
};

struct LinkSummary {
  bool modelled = false;            // false: analytic network, no per-link model
  size_t links = 0;                 // links of the topology
  size_t links_with_traffic = 0;    // links that carried any bytes
  std::vector<LinkRow> busiest;     // highest mean utilisation first (ties: more bytes, then lower LinkId)
};

inline constexpr size_t kBusiestLinks = 10;

// "nvlink_up", "nvlink_down", "nic_up", "nic_down", "trunk_up", "trunk_down".
std::string_view link_kind_key(network::LinkKind kind);

// The `top` links with the highest mean utilisation. Stats naming a link outside `links`
// are ignored; links that carried nothing are never listed.
LinkSummary summarize_links(const std::vector<network::LinkInfo>& links,
                            const std::vector<network::LinkStats>& stats, size_t top = kBusiestLinks);
// The analytic cost model: nothing per link.
LinkSummary analytic_links();

}  // namespace lacuna::report
