#include "sim/run/goodput_run.h"

#include <gtest/gtest.h>

#include "sim/goodput/fleet_defaults.h"
#include "sim/scenario/reliability.h"

namespace lacuna::run {
namespace {

// The kinds a scenario's reliability section may name are those the
// defaults define, in the same order.
TEST(GoodputRun, TheSectionNamesTheDefaultKinds) {
  std::vector<std::string> names;
  for (const goodput::ComponentKind& k : goodput::default_components(8, 1, 0)) names.push_back(k.name);
  EXPECT_EQ(names, scenario::reliability_component_kinds());
}

}  // namespace
}  // namespace lacuna::run
