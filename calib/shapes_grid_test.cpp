// Shape extraction (dedup, counts, fixed-duration ops skipped) and the grid
// (exact shapes included and bracketed, FLOPs/bytes of grid points).
#include <gtest/gtest.h>

#include <algorithm>

#include "calib/grid.h"
#include "calib/shapes.h"
#include "sim/model/kernels.h"
#include "tools/cli/scenario_shapes.h"

namespace lacuna::calibrate {
namespace {

ir::Op compute_op(ir::OpClass c, ir::KernelVariant v, std::vector<int64_t> shape, double flops, double bytes,
                  int64_t fixed = 0) {
  ir::Op op;
  ir::Compute* k = op.mutable_compute();
  k->set_op_class(c);
  k->set_variant(v);
  for (int64_t d : shape) k->add_shape(d);
  k->set_flops(flops);
  k->set_bytes(bytes);
  k->set_fixed_duration_ns(fixed);
  return op;
}

// Two rank classes: class 0 bound to 3 ranks, class 1 to 1 rank.
ir::Program small_program() {
  ir::Program p;
  ir::RankClass* a = p.add_classes();
  ir::Stream* s = a->add_streams();
  *s->add_ops() = compute_op(ir::GEMM, ir::VARIANT_FORWARD, {64, 32, 16}, 1, 2);
  *s->add_ops() = compute_op(ir::GEMM, ir::VARIANT_FORWARD, {64, 32, 16}, 1, 2);  // duplicate
  *s->add_ops() = compute_op(ir::GEMM, ir::VARIANT_BACKWARD_INPUT, {64, 32, 16}, 1, 2);
  s->add_ops()->mutable_collective()->set_bytes(100);                             // not compute
  *s->add_ops() = compute_op(ir::GELU, ir::VARIANT_FORWARD, {1024}, 0, 4096, 5000);  // fixed: skipped
  ir::RankClass* b = p.add_classes();
  ir::Stream* t = b->add_streams();
  *t->add_ops() = compute_op(ir::GEMM, ir::VARIANT_FORWARD, {64, 32, 16}, 1, 2);
  *t->add_ops() = compute_op(ir::LAYERNORM, ir::VARIANT_FORWARD, {64, 32}, 0, 8192);
  for (int cls : {0, 0, 0, 1}) p.add_ranks()->set_class_id(cls);
  return p;
}

TEST(CalibShapes, DeduplicatesAndCountsRunsOverRanks) {
  const ShapeSet s = extract_shapes(small_program());
  ASSERT_EQ(s.size(), 3u);  // GEMM fwd, GEMM bwd-input, LAYERNORM fwd; the fixed GELU skipped
  const KernelKey fwd{ir::GEMM, ir::VARIANT_FORWARD, {64, 32, 16}};
  ASSERT_TRUE(s.count(fwd));
  EXPECT_EQ(s.at(fwd).count, 2 * 3 + 1);  // twice on 3 ranks, once on 1
  EXPECT_EQ(s.at(fwd).flops, 1);
  EXPECT_EQ(s.at(fwd).bytes, 2);
  EXPECT_EQ(s.at(KernelKey{ir::GEMM, ir::VARIANT_BACKWARD_INPUT, {64, 32, 16}}).count, 3);
  EXPECT_EQ(s.at(KernelKey{ir::LAYERNORM, ir::VARIANT_FORWARD, {64, 32}}).count, 1);
  EXPECT_FALSE(s.count(KernelKey{ir::GELU, ir::VARIANT_FORWARD, {1024}}));

  ShapeSet merged = s;
  merge_shapes(merged, s);
  EXPECT_EQ(merged.size(), 3u);
  EXPECT_EQ(merged.at(fwd).count, 14);
}

TEST(CalibShapes, CompiledScenarioShapesAreDistinctAndConsistent) {
  const ShapeSet s =
      cli::extract_shapes_from_scenario(std::string(LACUNA_SOURCE_DIR) + "/scenarios/cpu/tiny-mllm-cpu-8rank.pbtxt");
  ASSERT_GT(s.size(), 20u);
  for (const auto& [key, use] : s) {
    EXPECT_GT(use.count, 0) << describe(key);
    EXPECT_GT(use.bytes, 0) << describe(key);
    if (key.op_class == ir::GEMM) {
      ASSERT_GE(key.shape.size(), 3u);
      const double batch = key.shape.size() == 4 ? double(key.shape[3]) : 1.0;
      EXPECT_DOUBLE_EQ(use.flops, 2.0 * key.shape[0] * key.shape[1] * key.shape[2] * batch) << describe(key);
    }
  }
}

TEST(CalibGrid, SweepCoversAQuarterOfTheMinimumToFourTimesTheMaximum) {
  EXPECT_EQ(sweep_values(64, 256), (std::vector<int64_t>{16, 32, 64, 128, 256, 512, 1024}));
  EXPECT_EQ(sweep_values(100, 100), (std::vector<int64_t>{16, 32, 64, 128, 256, 512}));  // 25 → 16, 400 → 512
  EXPECT_EQ(sweep_values(1, 2), (std::vector<int64_t>{1, 2, 4, 8}));
}

TEST(CalibGrid, ContainsTheExactShapesAndBracketsThem) {
  ShapeSet shapes;
  shapes[{ir::GEMM, ir::VARIANT_FORWARD, {100, 32, 16}}] = {2.0 * 100 * 32 * 16, 1, 5};
  shapes[{ir::GEMM, ir::VARIANT_FORWARD, {300, 32, 16}}] = {2.0 * 300 * 32 * 16, 1, 5};
  shapes[{ir::GEMM, ir::VARIANT_FORWARD, {300, 64, 16}}] = {2.0 * 300 * 64 * 16, 1, 1};  // another family
  shapes[{ir::LAYERNORM, ir::VARIANT_FORWARD, {96, 32}}] = {0, 96.0 * 32 * 2 * 2, 3};

  const auto exact_only = make_grid(shapes, false);
  ASSERT_EQ(exact_only.size(), shapes.size());
  for (const auto& p : exact_only) EXPECT_TRUE(p.from_scenario);

  const auto grid = make_grid(shapes, true);
  EXPECT_TRUE(std::is_sorted(grid.begin(), grid.end(), [](const GridPoint& a, const GridPoint& b) { return a.key < b.key; }));
  for (const auto& [key, use] : shapes) {
    const auto it = std::find_if(grid.begin(), grid.end(), [&](const GridPoint& p) { return p.key == key; });
    ASSERT_NE(it, grid.end()) << describe(key);
    EXPECT_TRUE(it->from_scenario);
    EXPECT_EQ(it->count, use.count);
    // Bracketed: grid points of the same family strictly below and above.
    bool below = false, above = false;
    for (const auto& p : grid) {
      if (p.from_scenario || family_of(p.key) != family_of(key)) continue;
      below = below || p.key.shape[0] < key.shape[0];
      above = above || p.key.shape[0] > key.shape[0];
    }
    EXPECT_TRUE(below && above) << describe(key);
  }
  // The [100|300, 32, 16] family sweeps 16 .. 2048 (25 → 16, 1200 → 2048).
  int family_points = 0;
  for (const auto& p : grid) {
    if (family_of(p.key) != KernelKey{ir::GEMM, ir::VARIANT_FORWARD, {0, 32, 16}}) continue;
    ++family_points;
    EXPECT_GE(p.key.shape[0], 16);
    EXPECT_LE(p.key.shape[0], 2048);
    // Grid points carry the GEMM formula's work.
    const model::Kernel k = model::gemm(ir::ROLE_UNSPECIFIED, ir::FORWARD, p.key.shape[0], 32, 16);
    EXPECT_DOUBLE_EQ(p.flops, k.flops);
    if (!p.from_scenario) EXPECT_DOUBLE_EQ(p.bytes, k.bytes);
  }
  EXPECT_EQ(family_points, 8 + 2);  // 16 .. 2048 and the two exact shapes
  // Memory-bound classes scale in proportion to shape[0].
  const auto ln = std::find_if(grid.begin(), grid.end(), [](const GridPoint& p) {
    return p.key == KernelKey{ir::LAYERNORM, ir::VARIANT_FORWARD, {256, 32}};
  });
  ASSERT_NE(ln, grid.end());
  EXPECT_DOUBLE_EQ(ln->bytes, 256.0 * 32 * 2 * 2);
  EXPECT_FALSE(ln->from_scenario);
  EXPECT_EQ(ln->count, 0);
}

}  // namespace
}  // namespace lacuna::calibrate
