#include "tools/cli/scale_down_option.h"

namespace lacuna::cli {

void add_scale_down_option(CLI::App* sub, int64_t& factor) {
  sub->add_option("--scale-down", factor,
                  "divide hidden sizes and sequence lengths by N (docs/scenario.md#scale-down)")
      ->type_name("N")
      ->check(CLI::PositiveNumber);
}

}  // namespace lacuna::cli
