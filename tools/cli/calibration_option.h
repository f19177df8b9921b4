// `--calibration PROFILE` and `--allow-device-mismatch`, shared by the
// commands that simulate: kernel times measured by `lacuna calibrate` instead
// of the roofline (sim/run/simulation_input.h builds the model).
#pragma once

#include <CLI/CLI.hpp>

#include "sim/run/simulation_input.h"

namespace lacuna::cli {

using CalibrationOption = run::CalibrationChoice;

void add_calibration_options(CLI::App* sub, CalibrationOption& option);

}  // namespace lacuna::cli
