// The fabric above the NICs: cluster.network with its preset applied and every
// field checked. A preset fills only the fields the scenario leaves unset, as
// the hardware presets do for the GPU and its links (docs/network.md).
#pragma once

#include <string>
#include <vector>

#include "sim/proto/scenario.pb.h"

namespace lacuna::network {

// Names accepted in cluster.network.preset: "dgx-a100", "dgx-h100",
// "megascale", "nvl72-quantum-x800", "nvl72-spectrum-x", "single-switch".
std::vector<std::string> network_preset_names();

// The preset's NetworkSpec; lacuna::Error naming cluster.network.preset and
// listing the valid names for an unknown one.
scenario::NetworkSpec network_preset(const std::string& name);

// The preset a cluster gets when cluster.network.preset is empty: by GPU preset
// ("a100-80gb-sxm" → "dgx-a100", "h100-sxm" / "h200-sxm" / "b200" →
// "dgx-h100", "gb200-nvl72" / "gb300-nvl72" → "nvl72-quantum-x800"), else
// "single-switch" (one non-blocking tier).
std::string default_network_preset(const scenario::Cluster& cluster);

// cluster.network with the preset applied to unset fields and validated: every
// tier has children (except the top), oversubscription ≥ 1, latency_us ≥ 0;
// compute_slowdown_under_comm in [0, 10]; algorithm / protocol known values.
// Throws lacuna::Error naming the field, e.g.
// "cluster.network.tiers[1].oversubscription: must be ≥ 1".
scenario::NetworkSpec resolve_network(const scenario::Cluster& cluster);

}  // namespace lacuna::network
