// Where an FP8 program's compute time goes (docs/fp8.md#breakdown): per
// pipeline rank, the kernel time of its FP8 GEMMs and BF16 GEMMs by role,
// its casts and amax passes by phase, and its amax all-reduces, as the cost
// model times them (kernel time, not exposure: overlap is the bubble
// table's). Set by `simulate` on FP8 programs only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/core/units.h"
#include "sim/cost/cost_model.h"
#include "sim/proto/program.pb.h"

namespace lacuna::report {

struct Fp8BreakdownRow {
  std::string what;  // "gemm_fp8", "gemm_bf16", "fp8_cast", "fp8_amax", "amax_all_reduce"
  std::string role;  // kernel role (GEMMs) or phase (casts, amax)
  int64_t ops = 0;
  TimeNs time;       // summed over the iteration on one rank of the class
};

struct Fp8RankBreakdown {
  int32_t rank_class = 0;
  std::string name;  // RankClass.name
  std::vector<Fp8BreakdownRow> rows;  // in a fixed order: kind, then role / phase name
  TimeNs total(const std::string& what) const;
};

struct Fp8Breakdown {
  std::string recipe;
  std::vector<Fp8RankBreakdown> ranks;  // one per rank class
};

Fp8Breakdown fp8_breakdown(const ir::Program& program, const cost::CostModel& cost);

// The terminal section (a few lines per rank class).
std::string format_fp8_breakdown(const Fp8Breakdown& b);

}  // namespace lacuna::report
