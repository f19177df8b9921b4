#include "sim/report/fp8_breakdown.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "sim/report/format.h"
#include "sim/report/names.h"

namespace lacuna::report {
namespace {

// Fixed order of the kinds in the output.
int kind_order(const std::string& what) {
  if (what == "gemm_fp8") return 0;
  if (what == "gemm_bf16") return 1;
  if (what == "fp8_cast") return 2;
  if (what == "fp8_amax") return 3;
  return 4;
}

std::string role_or_class(const ir::Compute& c) {
  const std::string_view r = role_name(c.role());
  return r.empty() ? ir::KernelRole_Name(c.role()) : std::string(r);
}

}  // namespace

TimeNs Fp8RankBreakdown::total(const std::string& what) const {
  TimeNs t;
  for (const auto& r : rows)
    if (r.what == what) t += r.time;
  return t;
}

Fp8Breakdown fp8_breakdown(const ir::Program& program, const cost::CostModel& cost) {
  Fp8Breakdown out;
  out.recipe = program.info().has_fp8() ? scenario::Fp8Recipe_Name(program.info().fp8().recipe()) : "";
  // The amax all-reduces are TP collectives of one fp32; timed as a TP group
  // inside one NVLink domain (where Megatron places TP).
  const int32_t tp = std::max(1, program.info().tp());
  const cost::GroupShape tp_group{tp, 1, tp};
  for (int32_t c = 0; c < program.classes_size(); ++c) {
    std::map<std::tuple<int, std::string, std::string>, Fp8BreakdownRow> rows;
    auto add = [&](const std::string& what, const std::string& role, TimeNs t) {
      auto& r = rows[{kind_order(what), what, role}];
      r.what = what;
      r.role = role;
      ++r.ops;
      r.time += t;
    };
    for (const auto& stream : program.classes(c).streams())
      for (const auto& op : stream.ops()) {
        if (op.has_compute()) {
          const auto& k = op.compute();
          if (k.op_class() == ir::GEMM)
            add(k.precision() == scenario::FP8 ? "gemm_fp8" : "gemm_bf16", role_or_class(k), cost.compute(k));
          else if (k.role() == ir::ROLE_FP8_CAST || k.role() == ir::ROLE_FP8_AMAX)
            add(k.role() == ir::ROLE_FP8_CAST ? "fp8_cast" : "fp8_amax", std::string(phase_key(op.phase())),
                cost.compute(k));
        } else if (op.has_collective() && stream.kind() == ir::TP_COMM && op.collective().kind() == ir::ALL_REDUCE &&
                   op.collective().bytes() == 4) {
          add("amax_all_reduce", std::string(phase_key(op.phase())),
              cost.collective(ir::ALL_REDUCE, op.collective().bytes(), tp_group));
        }
      }
    Fp8RankBreakdown rb;
    rb.rank_class = c;
    rb.name = program.classes(c).name();
    for (auto& [key, row] : rows) rb.rows.push_back(std::move(row));
    out.ranks.push_back(std::move(rb));
  }
  return out;
}

std::string format_fp8_breakdown(const Fp8Breakdown& b) {
  std::string out = fmt::format("\n  FP8 ({}): kernel time per iteration on one rank of each class\n", b.recipe);
  for (const auto& r : b.ranks) {
    out += fmt::format("    {}: FP8 GEMM {}, BF16 GEMM {}, casts {}, amax {}, amax all-reduce {}\n", r.name,
                       format_duration(r.total("gemm_fp8")), format_duration(r.total("gemm_bf16")),
                       format_duration(r.total("fp8_cast")), format_duration(r.total("fp8_amax")),
                       format_duration(r.total("amax_all_reduce")));
    for (const auto& row : r.rows)
      out += fmt::format("      {:<16} {:<18} {:>6} ops  {}\n", row.what, row.role, row.ops, format_duration(row.time));
  }
  return out;
}

}  // namespace lacuna::report
