#include "sim/placement/recompute_ladder.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace lacuna::placement {

std::vector<ModuleRecompute> recompute_ladder(int64_t chunk_layers) {
  std::vector<ModuleRecompute> out{{scenario::RECOMPUTE_NONE, 0}, {scenario::RECOMPUTE_SELECTIVE, 0}};
  for (int64_t n = 1; n < chunk_layers; ++n) out.push_back({scenario::RECOMPUTE_FULL, n});
  out.push_back({scenario::RECOMPUTE_FULL, 0});
  return out;
}

int32_t ladder_position(const ModuleRecompute& r, int64_t chunk_layers) {
  switch (r.mode) {
    case scenario::RECOMPUTE_NONE: return 0;
    case scenario::RECOMPUTE_SELECTIVE: return 1;
    default: break;
  }
  const int64_t top = std::max<int64_t>(chunk_layers, 1);
  const int64_t n = r.num_layers <= 0 || r.num_layers >= top ? top : r.num_layers;
  return static_cast<int32_t>(1 + n);
}

bool keeps_no_more(const ModuleRecompute& a, const ModuleRecompute& b) {
  if (a == b || a.mode == scenario::RECOMPUTE_NONE) return true;
  if (b.mode != scenario::RECOMPUTE_FULL) return false;  // a is SELECTIVE or FULL
  if (b.num_layers <= 0) return true;                    // every layer: only inputs kept
  return a.mode == scenario::RECOMPUTE_FULL && a.num_layers > 0 && a.num_layers <= b.num_layers;
}

namespace {

std::vector<int64_t> ranks_per_class(const ir::Program& program) {
  std::vector<int64_t> ranks(static_cast<size_t>(program.classes_size()), 0);
  for (const ir::RankBinding& b : program.ranks())
    if (b.class_id() >= 0 && b.class_id() < program.classes_size()) ++ranks[static_cast<size_t>(b.class_id())];
  return ranks;
}

int64_t kernel_ns(const ir::Compute& k, const cost::CostModel& cost) {
  return k.fixed_duration_ns() > 0 ? k.fixed_duration_ns() : cost.compute(k).count();
}

}  // namespace

int64_t recompute_time_ns(const ir::Program& program, int32_t module, const cost::CostModel& cost) {
  const auto ranks = ranks_per_class(program);
  int64_t total = 0;
  for (int32_t c = 0; c < program.classes_size(); ++c) {
    if (ranks[static_cast<size_t>(c)] == 0) continue;
    int64_t per_rank = 0;
    for (const ir::Stream& st : program.classes(c).streams()) {
      if (st.kind() != ir::COMPUTE) continue;
      for (const ir::Op& op : st.ops())
        if (op.has_compute() && op.phase() == ir::RECOMPUTE && op.module() == module)
          per_rank += kernel_ns(op.compute(), cost);
    }
    total += per_rank * ranks[static_cast<size_t>(c)];
  }
  return total;
}

int64_t block_recompute_time_ns(const ir::Program& full, int32_t module, int64_t num_layers,
                                const cost::CostModel& cost) {
  const auto ranks = ranks_per_class(full);
  int64_t total = 0;
  for (int32_t c = 0; c < full.classes_size(); ++c) {
    if (ranks[static_cast<size_t>(c)] == 0) continue;
    std::map<int32_t, std::set<int32_t>> layers;  // chunk → the module's layers
    std::map<std::pair<int32_t, int32_t>, int64_t> time;  // (chunk, layer) → recompute ns
    for (const ir::Stream& st : full.classes(c).streams()) {
      if (st.kind() != ir::COMPUTE) continue;
      for (const ir::Op& op : st.ops()) {
        if (!op.has_compute() || op.module() != module || op.layer() < 0) continue;
        if (op.phase() == ir::FORWARD) layers[op.chunk()].insert(op.layer());
        if (op.phase() == ir::RECOMPUTE) time[{op.chunk(), op.layer()}] += kernel_ns(op.compute(), cost);
      }
    }
    int64_t per_rank = 0;
    for (const auto& [chunk, set] : layers) {
      int64_t taken = 0;
      for (int32_t layer : set) {
        if (num_layers > 0 && taken++ >= num_layers) break;
        if (const auto it = time.find({chunk, layer}); it != time.end()) per_rank += it->second;
      }
    }
    total += per_rank * ranks[static_cast<size_t>(c)];
  }
  return total;
}

int64_t max_chunk_layers(const ir::Program& program, int32_t module) {
  int64_t most = 0;
  for (const ir::RankClass& cls : program.classes()) {
    std::map<int32_t, std::set<int32_t>> layers;  // chunk → layers
    for (const ir::Stream& st : cls.streams())
      for (const ir::Op& op : st.ops())
        if (op.has_compute() && op.phase() == ir::FORWARD && op.module() == module && op.layer() >= 0)
          layers[op.chunk()].insert(op.layer());
    for (const auto& [chunk, set] : layers) most = std::max<int64_t>(most, static_cast<int64_t>(set.size()));
  }
  return most;
}

std::vector<int64_t> recompute_transient_bytes(const ir::Program& program) {
  std::vector<int64_t> out;
  for (const ir::RankClass& cls : program.classes()) {
    int32_t streams_with_memory = 0;
    int64_t most = 0;
    for (const ir::Stream& st : cls.streams()) {
      using Key = std::tuple<int32_t, int32_t, int32_t, int32_t>;  // module, chunk, microbatch, layer
      std::map<Key, int64_t> open;
      int64_t live = 0;
      bool any = false;
      for (const ir::Op& op : st.ops()) {
        if (!op.has_compute() || op.compute().memory_delta_bytes() == 0) continue;
        any = true;
        const int64_t delta = op.compute().memory_delta_bytes();
        const Key key{op.module(), op.chunk(), op.microbatch(), op.layer()};
        if (op.phase() == ir::RECOMPUTE && delta > 0) {
          open[key] += delta;
          live += delta;
          most = std::max(most, live);
        } else if (delta < 0 && (op.phase() == ir::BACKWARD_INPUT || op.phase() == ir::BACKWARD_WEIGHT)) {
          if (const auto it = open.find(key); it != open.end()) {
            live -= it->second;
            open.erase(it);
          }
        }
      }
      streams_with_memory += any ? 1 : 0;
    }
    out.push_back(streams_with_memory > 1 ? -1 : most);
  }
  return out;
}

}  // namespace lacuna::placement
