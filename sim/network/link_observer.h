// What the flow-level network tells the outside world about its links: every
// change of a link's load, and per-link totals at the end. Traces draw link
// utilisation counters from it; summaries list the busiest links.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/core/units.h"

namespace lacuna::network {

using LinkId = uint32_t;

enum class LinkKind : uint8_t {
  kNvlinkUp,    // GPU → NVSwitch
  kNvlinkDown,  // NVSwitch → GPU
  kNicUp,       // GPU's NIC → first switch tier
  kNicDown,     // first switch tier → NIC
  kTrunkUp,     // a switch group's pooled uplinks to the next tier
  kTrunkDown,   // the next tier into a switch group
};

// One direction of a physical (or pooled) link.
struct LinkInfo {
  LinkKind kind = LinkKind::kNvlinkUp;
  std::string name;  // e.g. "node 12 gpu 3 nvlink up", "node 12 nic 3 up", "tor rail 3 group 1 up"
  double capacity_bytes_per_s = 0;
  int32_t node = -1;  // NVLink and NIC links; -1 for trunks
  int32_t tier = -1;  // trunks: index into cluster.network.tiers
  int32_t gpu = -1;   // NVLink links: the local GPU
  int32_t rail = -1;  // NIC links: the NIC; rail-optimized first-tier trunks: the rail
  // The nodes whose traffic can cross the link: the node itself for NVLink
  // and NIC links, the contiguous nodes under the switch group for trunks.
  int32_t first_node = -1;
  int32_t last_node = -1;
};

// Per link over one run.
struct LinkStats {
  LinkId link = 0;
  double bytes = 0;                 // carried (integral of load)
  double mean_utilisation = 0;      // bytes / (capacity × iteration time)
  double peak_utilisation = 0;      // highest load / capacity seen
  TimeNs saturated;                 // time at ≥ 99 % of capacity
};

class LinkObserver {
 public:
  virtual ~LinkObserver() = default;
  // Once per run, before any load change: the links, indexed by LinkId.
  virtual void on_links(const std::vector<LinkInfo>& /*links*/) {}
  // A link's load changed at `t` (bytes/s it now carries; 0 when idle). Only
  // links that carried traffic are reported, in time order; several changes at
  // one time come in LinkId order, the last one holding.
  virtual void on_link_load(TimeNs t, LinkId link, double bytes_per_s) = 0;
};

}  // namespace lacuna::network
