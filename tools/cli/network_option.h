// `--network flow|analytic`, shared by the commands that simulate; the
// models themselves are in sim/run/network_setup.h.
#pragma once

#include <CLI/CLI.hpp>

#include "sim/run/network_setup.h"

namespace lacuna::cli {

using run::NetworkMode;

// Adds --network to `sub` (default flow).
void add_network_option(CLI::App* sub, NetworkMode& mode);

}  // namespace lacuna::cli
