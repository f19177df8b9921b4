// The scenario's `reliability` section (docs/goodput.md): what it may name.
#pragma once

#include <string>
#include <vector>

namespace lacuna::scenario {

// The component kinds `reliability.components` may override, those of
// goodput::default_components: gpu, hbm, nic, network, host, software, other.
const std::vector<std::string>& reliability_component_kinds();

}  // namespace lacuna::scenario
