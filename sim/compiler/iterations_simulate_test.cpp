// Compiled programs of every schedule kind run several iterations in one
// engine run (docs/engine.md#iterations): events, collectives and p2p keep
// matching across iteration boundaries (no deadlock, no mismatch), iteration
// 0 is the single iteration exactly, later iterations repeat (a deterministic
// program reaches a steady state), and fold stays exact.
#include <gtest/gtest.h>

#include "sim/compiler/compile.h"
#include "sim/compiler/compiler_test_support.h"
#include "sim/engine/simulator.h"

namespace lacuna::compiler {
namespace {

using testing::make_scenario;
using testing::Small;

TEST(IterationsSimulate, EveryScheduleRepeatsWithAndWithoutDpOverlap) {
  const testing::TrivialCost cost;
  for (auto [name, kind, v] : {std::tuple{"gpipe", scenario::GPIPE, 1}, std::tuple{"1f1b", scenario::ONE_F_ONE_B, 1},
                               std::tuple{"interleaved", scenario::INTERLEAVED_1F1B, 2},
                               std::tuple{"zb-h1", scenario::ZB_H1, 1}}) {
    for (const bool overlap : {true, false}) {
      Small s;
      s.schedule = kind;
      s.v = v;
      s.sp = true;
      s.overlap_grad = overlap;
      s.overlap_param = overlap;
      SCOPED_TRACE(std::string(name) + (overlap ? " with DP overlap" : " without DP overlap"));
      const ir::Program p = compile(make_scenario(s));
      const engine::SimulationResult single = engine::Simulator(p, cost).run();
      constexpr int32_t kIterations = 4;
      const engine::SimulationResult r = engine::Simulator(p, cost, {.iterations = kIterations}).run();
      ASSERT_EQ(r.iteration_ends.size(), size_t{kIterations});
      EXPECT_EQ(r.iteration_ends[0], single.end_time);
      EXPECT_EQ(r.ops, kIterations * single.ops);
      const TimeNs steady = r.iteration_ends[1] - r.iteration_ends[0];
      EXPECT_GT(steady, TimeNs::zero());
      EXPECT_LE(steady, single.end_time);
      for (int32_t k = 2; k < kIterations; ++k) {
        EXPECT_EQ(r.iteration_ends[static_cast<size_t>(k)] - r.iteration_ends[static_cast<size_t>(k - 1)], steady)
            << "iteration " << k;
      }
      const engine::SimulationResult f = engine::Simulator(p, cost, {.fold = true, .iterations = kIterations}).run();
      EXPECT_EQ(f.iteration_ends, r.iteration_ends);
    }
  }
}

}  // namespace
}  // namespace lacuna::compiler
