// Measured kernel times by (op class, variant, shape), with a rule for every
// shape the profile did not measure:
//   exact         the shape was measured: its median;
//   interpolated  measured shapes of the same family (equal shape[1..], i.e.
//                 the same kernel at another size-like first dimension) lie
//                 below and above the query's shape[0]: log(time) linear in
//                 log(shape[0]) between the nearest two (exact at grid points,
//                 monotone between them);
//   extrapolated  otherwise: the table's fitted roofline at the op's own IR
//                 FLOPs and bytes. With a per-shape factor (the scenario GPU's
//                 cost::KernelEfficiency, docs/cost-model.md#per-shape-efficiency)
//                 the roofline is refitted to the measurements' FLOPs divided
//                 by their shape factors, i.e. to the rate of a perfect shape,
//                 and an op is timed at its FLOPs divided by its own factor:
//                 unmeasured GEMM and attention shapes keep their tile, wave
//                 and block effects on top of the measured rate.
// A class/variant without a table is an error, never a silent fallback.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sim/core/units.h"
#include "sim/proto/calibration.pb.h"
#include "sim/proto/program.pb.h"

namespace lacuna::calibration {

enum class LookupKind { kExact = 0, kInterpolated = 1, kExtrapolated = 2 };
inline constexpr int kNumLookupKinds = 3;
const char* lookup_kind_name(LookupKind kind);  // "exact", "interpolated", "extrapolated"

struct Lookup {
  TimeNs time;
  LookupKind kind = LookupKind::kExact;
};

// A kernel's per-shape efficiency factor in (0, 1] (cost::KernelEfficiency::factor).
using ShapeFactor = std::function<double(const ir::Compute&)>;

class KernelTable {
 public:
  // `profile` must be valid (validate_profile); `profile_path` is named in
  // errors, and `scenario` (the scenario being simulated; empty: the
  // profile's own) in the hint of the missing-table error. `shape` (empty:
  // none) shapes the extrapolation as described above.
  KernelTable(const calib::CalibrationProfile& profile, std::string profile_path, std::string scenario = {},
              ShapeFactor shape = {});

  // Throws lacuna::Error naming the class, variant and profile file when the
  // profile has no table for the op's (class, variant).
  Lookup lookup(const ir::Compute& op) const;
  bool has_table(ir::OpClass op_class, ir::KernelVariant variant) const;
  const std::string& profile_path() const { return path_; }

 private:
  struct Table {
    std::map<std::vector<int64_t>, int64_t> exact;  // shape → median ns
    // family (shape[1..], with the rank of the shape) → (shape[0], median ns), ascending
    std::map<std::vector<int64_t>, std::vector<std::pair<int64_t, int64_t>>> families;
    calib::RooflineFit fit;
    bool shaped = false;  // fit is per perfect shape: extrapolate at flops / shape factor
  };
  std::map<std::pair<int, int>, Table> tables_;  // (op class, variant)
  std::string path_;
  std::string scenario_;  // for the hint in errors
  ShapeFactor shape_;
};

// The family key of a shape: its dimensions after the first.
std::vector<int64_t> shape_family(const std::vector<int64_t>& shape);

}  // namespace lacuna::calibration
