#include "sim/report/analyses/fp8_breakdown.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <span>
#include <tuple>

#include "sim/cost/group_shape.h"
#include "sim/report/formats/format.h"
#include "sim/report/formats/names.h"

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

// Delayed scaling's amax slot (found by kind); -1 when the program has none.
int32_t amax_slot(const ir::Program& program) {
  for (int32_t s = 0; s < program.group_slots_size(); ++s)
    if (program.group_slots(s).kind() == ir::AMAX_REDUCTION) return s;
  return -1;
}

// The amax group of the class's first rank, as the cost model sees it;
// nullopt when the slot is -1 or binds no group (one rank: no all-reduce).
std::optional<cost::GroupShape> amax_group(const ir::Program& program, int32_t slot, int32_t rank_class) {
  if (slot < 0) return std::nullopt;
  for (const auto& r : program.ranks()) {
    if (r.class_id() != rank_class || slot >= r.group_size()) continue;
    const int32_t g = r.group(slot);
    if (g < 0) return std::nullopt;
    const auto& ranks = program.groups(g).ranks();
    return cost::shape_of_ranks(program, std::span<const int32_t>(ranks.data(), static_cast<size_t>(ranks.size())));
  }
  return std::nullopt;
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
  // Current scaling's amax all-reduces are TP collectives of one fp32, timed
  // as a TP group inside one NVLink domain (where Megatron places TP);
  // delayed scaling's run on the amax slot, timed on the class's amax group.
  const int32_t tp = std::max(1, program.info().tp());
  const cost::GroupShape tp_group{tp, 1, tp};
  const int32_t slot = amax_slot(program);
  for (int32_t c = 0; c < program.classes_size(); ++c) {
    std::map<std::tuple<int, std::string, std::string>, Fp8BreakdownRow> rows;
    auto add = [&](const std::string& what, const std::string& role, TimeNs t) {
      auto& r = rows[{kind_order(what), what, role}];
      r.what = what;
      r.role = role;
      ++r.ops;
      r.time += t;
    };
    const auto amax = amax_group(program, slot, c);
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
        } else if (op.has_collective() && amax && op.collective().group_slot() == slot) {
          // Delayed scaling: the whole rank's amaxes over the amax group.
          add("amax_all_reduce", std::string(phase_key(op.phase())),
              cost.collective(ir::ALL_REDUCE, op.collective().bytes(), *amax));
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
