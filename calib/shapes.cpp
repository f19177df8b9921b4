#include "calib/shapes.h"

#include "kernels/cpu_case.h"

namespace lacuna::calibrate {

ShapeSet extract_shapes(const ir::Program& program) {
  std::vector<int64_t> ranks_of_class(static_cast<size_t>(program.classes_size()), 0);
  for (const ir::RankBinding& b : program.ranks()) {
    if (b.class_id() >= 0 && b.class_id() < program.classes_size()) ++ranks_of_class[static_cast<size_t>(b.class_id())];
  }
  ShapeSet out;
  for (int c = 0; c < program.classes_size(); ++c) {
    const int64_t ranks = ranks_of_class[static_cast<size_t>(c)];
    for (const ir::Stream& s : program.classes(c).streams()) {
      for (const ir::Op& op : s.ops()) {
        if (!op.has_compute()) continue;
        const ir::Compute& k = op.compute();
        if (k.fixed_duration_ns() > 0) continue;
        KernelKey key{k.op_class(), k.variant(), {k.shape().begin(), k.shape().end()}};
        auto [it, fresh] = out.try_emplace(std::move(key));
        if (fresh) {
          it->second.flops = k.flops();
          it->second.bytes = k.bytes();
        }
        it->second.count += ranks;
      }
    }
  }
  return out;
}

void merge_shapes(ShapeSet& into, const ShapeSet& more) {
  for (const auto& [key, use] : more) {
    auto [it, fresh] = into.try_emplace(key, use);
    if (!fresh) it->second.count += use.count;
  }
}

std::string describe(const KernelKey& key) { return kernels::describe_op(key.op_class, key.variant, key.shape); }

}  // namespace lacuna::calibrate
