// The kernels a scenario runs, for `lacuna calibrate --scenario`: loaded,
// validated and compiled in its own placement here in the CLI, so that
// calib/ needs only the shape set (calib/shapes.h), not the compiler.
#pragma once

#include <cstdint>
#include <string>

#include "calib/shapes.h"

namespace lacuna::cli {

// placement::compile of the scenario (scaled down by `scale_down` > 1 first),
// then calibrate::extract_shapes.
calibrate::ShapeSet extract_shapes_from_scenario(const std::string& path, int64_t scale_down = 1);

}  // namespace lacuna::cli
