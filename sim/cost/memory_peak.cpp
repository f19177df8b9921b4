#include "sim/cost/memory_peak.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace lacuna::cost {

Bytes allocator_reserve_bytes(Bytes activation_peak, double fragmentation) {
  if (fragmentation <= 0 || activation_peak <= Bytes::zero()) return Bytes::zero();
  return Bytes(static_cast<int64_t>(std::ceil(fragmentation * static_cast<double>(activation_peak.count()))));
}

Bytes memory_peak_bytes(Bytes baseline, Bytes activation_peak, double fragmentation) {
  return baseline + activation_peak + allocator_reserve_bytes(activation_peak, fragmentation);
}

Bytes baseline_bytes(const ir::MemoryBaseline& m) {
  return Bytes(m.weights_bytes() + m.gradients_bytes() + m.optimizer_bytes() + m.other_bytes());
}

double allocator_fragmentation(const scenario::Cluster& cluster) {
  const auto& mo = cluster.memory_overheads();
  return mo.has_allocator_fragmentation() ? mo.allocator_fragmentation() : 0.0;
}

Bytes hbm_capacity_bytes(const scenario::Cluster& cluster) {
  const auto& gpu = cluster.gpu();
  return gpu.has_hbm_capacity_gib() ? Bytes(static_cast<int64_t>(std::llround(gpu.hbm_capacity_gib() * 1073741824.0)))
                                    : Bytes::zero();
}

Bytes activation_peak_bytes(const ir::RankClass& rank_class) {
  int64_t total = 0;
  for (const ir::Stream& stream : rank_class.streams()) {
    int64_t live = 0, peak = 0;
    for (const ir::Op& op : stream.ops()) {
      if (!op.has_compute() || op.compute().memory_delta_bytes() == 0) continue;
      live += op.compute().memory_delta_bytes();
      peak = std::max(peak, live);
    }
    total += peak;
  }
  return Bytes(total);
}

ClassMemory class_memory(const ir::Program& program, int32_t class_id) {
  const ir::RankClass& cls = program.classes(class_id);
  ClassMemory m;
  m.baseline = baseline_bytes(cls.memory());
  m.activation_peak = activation_peak_bytes(cls);
  m.reserve = allocator_reserve_bytes(m.activation_peak, allocator_fragmentation(program.cluster()));
  m.peak = m.baseline + m.activation_peak + m.reserve;
  return m;
}

Feasibility program_feasibility(const ir::Program& program) {
  Feasibility f;
  f.capacity = hbm_capacity_bytes(program.cluster());
  f.num_ranks = program.ranks_size();
  std::vector<ClassMemory> classes;
  classes.reserve(static_cast<size_t>(program.classes_size()));
  for (int32_t c = 0; c < program.classes_size(); ++c) classes.push_back(class_memory(program, c));
  std::vector<int32_t> first_rank(classes.size(), -1);
  for (int32_t r = 0; r < program.ranks_size(); ++r) {
    const int32_t c = program.ranks(r).class_id();
    if (c < 0 || c >= static_cast<int32_t>(classes.size())) continue;
    if (first_rank[static_cast<size_t>(c)] < 0) first_rank[static_cast<size_t>(c)] = r;
    if (f.capacity > Bytes::zero() && classes[static_cast<size_t>(c)].peak > f.capacity) ++f.over_capacity_ranks;
  }
  for (size_t c = 0; c < classes.size(); ++c) {
    if (first_rank[c] < 0) continue;  // a class no rank runs
    if (f.worst_class < 0 || classes[c].peak > f.worst.peak) {
      f.worst_class = static_cast<int32_t>(c);
      f.worst_rank = first_rank[c];
      f.worst = classes[c];
    }
  }
  return f;
}

}  // namespace lacuna::cost
