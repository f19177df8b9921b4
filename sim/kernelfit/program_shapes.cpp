#include "sim/kernelfit/program_shapes.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace lacuna::kernelfit {
namespace {

using ShapeKey = std::tuple<int, int, int, std::vector<int64_t>>;

ShapeKey shape_key_of(const MeasuredKernel& k) {
  return {static_cast<int>(k.op_class), static_cast<int>(k.pass), static_cast<int>(k.dtype), k.shape};
}

}  // namespace

ProgramShapes program_shapes(const ir::Program& program, const std::string& gpu, const std::string& group) {
  ProgramShapes out;
  scenario::Precision base = program.info().precision();
  if (base == scenario::FP8 || base == scenario::PRECISION_UNSPECIFIED) base = scenario::BF16;  // FP8: BF16 training
  std::map<ShapeKey, MeasuredKernel> rows;
  for (const ir::RankClass& c : program.classes()) {
    for (const ir::Stream& s : c.streams()) {
      for (const ir::Op& op : s.ops()) {
        if (!op.has_compute()) continue;
        const ir::Compute& k = op.compute();
        const scenario::Precision p = k.precision() != scenario::PRECISION_UNSPECIFIED ? k.precision() : base;
        if (k.fixed_duration_ns() > 0 || p == scenario::FP32) {
          ++out.skipped_ops;
          continue;
        }
        MeasuredKernel m;
        m.gpu = gpu;
        m.op_class = k.op_class();
        m.pass = pass_of(k.variant());
        m.dtype = p;
        m.shape.assign(k.shape().begin(), k.shape().end());
        m.group = group;
        m.label = ir::KernelRole_Name(k.role());
        rows.try_emplace(shape_key_of(m), std::move(m));
      }
    }
  }
  for (auto& [key, row] : rows) out.rows.push_back(std::move(row));
  return out;
}

void merge_program_shapes(std::vector<MeasuredKernel>& into, const std::vector<MeasuredKernel>& more) {
  std::map<ShapeKey, MeasuredKernel> rows;
  for (MeasuredKernel& k : into) rows.try_emplace(shape_key_of(k), std::move(k));
  for (const MeasuredKernel& k : more) rows.try_emplace(shape_key_of(k), k);
  into.clear();
  for (auto& [key, row] : rows) into.push_back(std::move(row));
}

}  // namespace lacuna::kernelfit
