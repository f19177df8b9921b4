#include "sim/compiler/layer_chain.h"

#include <limits>
#include <variant>

#include "sim/core/error.h"
#include "sim/model/kernels.h"

namespace lacuna::compiler {

int64_t steps_time_ns(const std::vector<model::Step>& steps, const cost::CostModel& cost, const ChainGroups& groups) {
  int64_t t = 0;
  for (const model::Step& step : steps) {
    if (const auto* k = std::get_if<model::Kernel>(&step)) {
      t += cost.compute(model::to_compute(*k)).count();
    } else {
      const auto& comm = std::get<model::CommPoint>(step);
      t += cost.collective(comm.kind, comm.bytes, groups.of(comm.group)).count();
    }
  }
  return t;
}

std::vector<ChainLayer> layer_chain(const StageInputs& in, int64_t llm_layers, const cost::CostModel& cost,
                                    const ChainGroups& groups) {
  const ModuleWork llm = llm_module_work(in);
  std::vector<ChainLayer> chain;
  auto add_module = [&](const ModuleWork& w, int32_t module, int64_t layers) {
    const int64_t dense_layer = steps_time_ns(w.layer_forward, cost, groups) +
                                (w.frozen ? 0 : steps_time_ns(w.layer_backward, cost, groups));
    const int64_t moe_layer = w.moe_layer_forward.empty() ? dense_layer
                                                          : steps_time_ns(w.moe_layer_forward, cost, groups) +
                                                                steps_time_ns(w.moe_layer_backward, cost, groups);
    const int64_t pre = steps_time_ns(w.pre_forward, cost, groups) +
                        (w.frozen ? 0 : steps_time_ns(w.pre_backward, cost, groups));
    const int64_t post = steps_time_ns(w.post_forward, cost, groups) + steps_time_ns(w.post_backward, cost, groups);
    for (int64_t l = 0; l < layers; ++l)
      chain.push_back(
          {module, l, (w.is_moe(l) ? moe_layer : dense_layer) + (l == 0 ? pre : 0) + (l == layers - 1 ? post : 0)});
  };
  for (size_t e = 0; e < in.encoders.size(); ++e)
    add_module(in.encoders[e], static_cast<int32_t>(e + 1), in.encoders[e].num_layers);
  add_module(llm, 0, llm_layers);
  return chain;
}

std::vector<int64_t> partition_by_count(int64_t links, int32_t parts) {
  if (parts < 1 || parts > links)
    throw Error("cannot split a chain of " + std::to_string(links) + " layers into " + std::to_string(parts) +
                " non-empty virtual stages");
  // Megatron's even split (num_layers / stages each) where it divides; the
  // remainder otherwise goes one layer each to the earliest stages.
  std::vector<int64_t> sizes(static_cast<size_t>(parts), links / parts);
  for (int64_t k = 0; k < links % parts; ++k) ++sizes[static_cast<size_t>(k)];
  return sizes;
}

std::vector<int64_t> partition_chain(const std::vector<int64_t>& times, int32_t parts) {
  const int64_t n = static_cast<int64_t>(times.size());
  if (parts < 1 || parts > n)
    throw Error("cannot split a chain of " + std::to_string(n) + " layers into " + std::to_string(parts) +
                " non-empty virtual stages");
  std::vector<int64_t> prefix(static_cast<size_t>(n + 1), 0);
  for (int64_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + times[static_cast<size_t>(i)];
  constexpr int64_t kInf = std::numeric_limits<int64_t>::max();
  // best[k][i]: the smallest possible largest sum splitting the first i links
  // into k parts; cut[k][i]: where the k-th part starts in that optimum.
  std::vector<std::vector<int64_t>> best(static_cast<size_t>(parts + 1), std::vector<int64_t>(n + 1, kInf));
  std::vector<std::vector<int64_t>> cut(static_cast<size_t>(parts + 1), std::vector<int64_t>(n + 1, -1));
  best[0][0] = 0;
  for (int32_t k = 1; k <= parts; ++k)
    for (int64_t i = k; i <= n - (parts - k); ++i)
      for (int64_t j = k - 1; j < i; ++j) {  // part k holds links [j, i)
        if (best[k - 1][j] == kInf) continue;
        const int64_t worst = std::max(best[k - 1][j], prefix[i] - prefix[j]);
        if (worst < best[k][i]) {  // strict: the earliest cut wins ties
          best[k][i] = worst;
          cut[k][i] = j;
        }
      }
  std::vector<int64_t> sizes(static_cast<size_t>(parts));
  for (int64_t k = parts, i = n; k >= 1; --k) {
    const int64_t j = cut[k][i];
    sizes[static_cast<size_t>(k - 1)] = i - j;
    i = j;
  }
  return sizes;
}

int64_t max_part_time(const std::vector<int64_t>& times, const std::vector<int64_t>& sizes) {
  int64_t worst = 0;
  size_t at = 0;
  for (int64_t size : sizes) {
    int64_t sum = 0;
    for (int64_t i = 0; i < size; ++i) sum += times.at(at++);
    worst = std::max(worst, sum);
  }
  return worst;
}

std::vector<std::vector<Segment>> chain_segments(const std::vector<ChainLayer>& chain,
                                                 const std::vector<int64_t>& sizes,
                                                 const std::vector<int64_t>& layers) {
  std::vector<std::vector<Segment>> out;
  size_t at = 0;
  for (int64_t size : sizes) {
    std::vector<Segment> stage;
    for (int64_t i = 0; i < size; ++i, ++at) {
      const ChainLayer& link = chain.at(at);
      if (stage.empty() || stage.back().module != link.module) {
        stage.push_back(Segment{link.module, link.layer, 0, link.layer == 0, false});
      }
      Segment& seg = stage.back();
      ++seg.count;
      seg.post = link.layer == layers.at(static_cast<size_t>(link.module)) - 1;
    }
    out.push_back(std::move(stage));
  }
  return out;
}

std::string describe_segments(const std::vector<Segment>& segments) {
  std::string out;
  for (const Segment& seg : segments) {
    if (!out.empty()) out += ' ';
    const bool llm = seg.module == 0;
    if (llm) {
      out += "llm:";
    } else {
      out += "enc";
      out += std::to_string(seg.module - 1);
      out += ':';
    }
    if (seg.pre) out += llm ? "emb+" : "patch+";
    if (seg.count > 0) {
      out += 'L';
      out += std::to_string(seg.first);
      if (seg.count > 1) {
        out += '-';
        out += std::to_string(seg.first + seg.count - 1);
      }
    }
    if (seg.post) out += llm ? "+head" : "+proj";
  }
  return out;
}

}  // namespace lacuna::compiler
