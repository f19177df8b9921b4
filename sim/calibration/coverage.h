// How much of a program's kernel time a calibration profile covered: distinct
// kernels (class, variant, shape) and compute time by lookup kind (exact,
// interpolated, extrapolated), overall and per op class. Computed from the
// program and the kernel table alone, without simulating: each rank class
// counts once per rank bound to it. (A rank's compute_time_scale scales all
// of its kernels alike and is left out.)
#pragma once

#include <array>
#include <cstdint>
#include <map>

#include "sim/calibration/kernel_table.h"
#include "sim/proto/program.pb.h"

namespace lacuna::calibration {

struct CoverageShare {
  int64_t kernels = 0;  // distinct (class, variant, shape)
  int64_t time_ns = 0;  // kernel time summed over every rank of the job
  bool operator==(const CoverageShare&) const = default;
};

struct CoverageRow {
  std::array<CoverageShare, kNumLookupKinds> by_kind{};  // indexed by LookupKind
  const CoverageShare& operator[](LookupKind k) const { return by_kind[static_cast<size_t>(k)]; }
  int64_t kernels() const;
  int64_t time_ns() const;
};

struct Coverage {
  CoverageRow total;
  std::map<ir::OpClass, CoverageRow> by_class;  // classes the program runs, in enum order
};

// Walks every compute op that the cost model would be asked for (ops with
// fixed_duration_ns > 0 are not); throws KernelTable's error for a class or
// variant the profile lacks, so calling it before a run fails fast.
Coverage kernel_coverage(const ir::Program& program, const KernelTable& table);

}  // namespace lacuna::calibration
