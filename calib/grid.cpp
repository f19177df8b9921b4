#include "calib/grid.h"

#include <algorithm>
#include <map>

#include "sim/model/kernels.h"

namespace lacuna::calibrate {

KernelKey family_of(const KernelKey& key) {
  KernelKey f = key;
  if (!f.shape.empty()) f.shape[0] = 0;
  return f;
}

std::vector<int64_t> sweep_values(int64_t min_first, int64_t max_first) {
  const int64_t lo_target = std::max<int64_t>(1, min_first / 4);
  int64_t lo = 1;
  while (lo * 2 <= lo_target) lo *= 2;
  const int64_t hi_target = max_first > (INT64_MAX / 8) ? max_first : max_first * 4;
  std::vector<int64_t> out;
  for (int64_t p = lo;; p *= 2) {
    out.push_back(p);
    if (p >= hi_target || p > INT64_MAX / 2) break;
  }
  return out;
}

void scale_work(const KernelKey& member, const KernelUse& use, int64_t first, double& flops, double& bytes) {
  if (member.op_class == ir::GEMM && (member.shape.size() == 3 || member.shape.size() == 4)) {
    const int64_t batch = member.shape.size() == 4 ? member.shape[3] : 1;
    const model::Kernel k = model::batched_gemm(ir::ROLE_UNSPECIFIED, ir::FORWARD, batch, first, member.shape[1],
                                                member.shape[2]);
    flops = k.flops;
    bytes = k.bytes;
    return;
  }
  const double ratio =
      member.shape.empty() || member.shape[0] <= 0 ? 1.0 : static_cast<double>(first) / static_cast<double>(member.shape[0]);
  flops = use.flops * ratio;
  bytes = use.bytes * ratio;
}

std::vector<GridPoint> make_grid(const ShapeSet& shapes, bool with_grid) {
  std::map<KernelKey, GridPoint> points;
  for (const auto& [key, use] : shapes) {
    GridPoint p;
    p.key = key;
    p.flops = use.flops;
    p.bytes = use.bytes;
    p.from_scenario = true;
    p.count = use.count;
    points.emplace(key, p);
  }
  if (with_grid) {
    // Per family: the members and their shape[0] range.
    struct Family {
      int64_t lo = INT64_MAX, hi = 0;
      const KernelKey* largest = nullptr;
      const KernelUse* largest_use = nullptr;
    };
    std::map<KernelKey, Family> families;
    for (const auto& [key, use] : shapes) {
      if (key.shape.empty() || key.shape[0] <= 0) continue;
      Family& f = families[family_of(key)];
      f.lo = std::min(f.lo, key.shape[0]);
      if (key.shape[0] >= f.hi) {
        f.hi = key.shape[0];
        f.largest = &key;
        f.largest_use = &use;
      }
    }
    for (const auto& [fkey, f] : families) {
      for (int64_t first : sweep_values(f.lo, f.hi)) {
        KernelKey k = fkey;
        k.shape[0] = first;
        if (points.count(k)) continue;  // an exact shape
        GridPoint p;
        p.key = k;
        scale_work(*f.largest, *f.largest_use, first, p.flops, p.bytes);
        points.emplace(std::move(k), p);
      }
    }
  }
  std::vector<GridPoint> out;
  out.reserve(points.size());
  for (auto& [k, p] : points) out.push_back(std::move(p));
  return out;
}

}  // namespace lacuna::calibrate
