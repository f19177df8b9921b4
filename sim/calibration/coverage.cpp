#include "sim/calibration/coverage.h"

#include <set>
#include <tuple>
#include <vector>

namespace lacuna::calibration {

int64_t CoverageRow::kernels() const {
  int64_t n = 0;
  for (const auto& s : by_kind) n += s.kernels;
  return n;
}

int64_t CoverageRow::time_ns() const {
  int64_t n = 0;
  for (const auto& s : by_kind) n += s.time_ns;
  return n;
}

Coverage kernel_coverage(const ir::Program& program, const KernelTable& table) {
  std::vector<int64_t> ranks_of_class(static_cast<size_t>(program.classes_size()), 0);
  for (const ir::RankBinding& r : program.ranks()) {
    if (r.class_id() >= 0 && r.class_id() < program.classes_size()) ++ranks_of_class[static_cast<size_t>(r.class_id())];
  }
  Coverage cov;
  std::set<std::tuple<int, int, std::vector<int64_t>>> seen;
  for (int c = 0; c < program.classes_size(); ++c) {
    const int64_t weight = ranks_of_class[static_cast<size_t>(c)];
    if (weight == 0) continue;
    for (const ir::Stream& stream : program.classes(c).streams()) {
      for (const ir::Op& op : stream.ops()) {
        if (!op.has_compute() || op.compute().fixed_duration_ns() > 0) continue;
        const ir::Compute& k = op.compute();
        const Lookup l = table.lookup(k);
        const auto kind = static_cast<size_t>(l.kind);
        CoverageRow& row = cov.by_class[k.op_class()];
        row.by_kind[kind].time_ns += l.time.count() * weight;
        cov.total.by_kind[kind].time_ns += l.time.count() * weight;
        if (seen.emplace(k.op_class(), k.variant(), std::vector<int64_t>(k.shape().begin(), k.shape().end())).second) {
          ++row.by_kind[kind].kernels;
          ++cov.total.by_kind[kind].kernels;
        }
      }
    }
  }
  return cov;
}

}  // namespace lacuna::calibration
