// The points `lacuna calibrate` measures: the exact shapes a scenario runs
// (from_scenario) plus, for interpolation, a sweep per family. A family is one
// kernel at every size of its first dimension: equal (op class, variant,
// shape[1..]) (sim/calibration/kernel_table.h interpolates along shape[0]).
// The sweep covers shape[0] with powers of two from the largest one ≤
// max(1, min/4) to the smallest one ≥ max×4 of the family's shape[0] values,
// so every exact shape is bracketed by grid points on both sides.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "calib/shapes.h"

namespace lacuna::calibrate {

struct GridPoint {
  KernelKey key;
  double flops = 0;  // IR formulas at this shape
  double bytes = 0;
  bool from_scenario = false;
  int64_t count = 0;  // runs per iteration (0 for pure grid points)
};

// Sorted by key. with_grid = false: the exact shapes only.
std::vector<GridPoint> make_grid(const ShapeSet& shapes, bool with_grid);

// The powers of two the sweep of a family with these shape[0] values covers.
std::vector<int64_t> sweep_values(int64_t min_first, int64_t max_first);

// FLOPs and bytes of `key` with shape[0] replaced by `first`, derived from a
// measured member of its family: GEMMs by their formula (sim/model/kernels.h),
// every other class scaled in proportion to shape[0] (their FLOPs and bytes
// are linear in it).
void scale_work(const KernelKey& member, const KernelUse& use, int64_t first, double& flops, double& bytes);

// The family key: class, variant and shape[1..] (the shape's rank included).
KernelKey family_of(const KernelKey& key);

}  // namespace lacuna::calibrate
