#include "tools/cli/scenario_shapes.h"

#include "sim/placement/compile.h"
#include "sim/scenario/scenario.h"

namespace lacuna::cli {

calibrate::ShapeSet extract_shapes_from_scenario(const std::string& path, int64_t scale_down) {
  return calibrate::extract_shapes(placement::compile(scenario::load_scenario(path, scale_down)));
}

}  // namespace lacuna::cli
