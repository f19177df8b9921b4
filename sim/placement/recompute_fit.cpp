#include "sim/placement/recompute_fit.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <queue>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "sim/cost/memory_peak.h"

namespace lacuna::placement {

namespace {

using Rungs = std::vector<int32_t>;  // per module, an index into its ladder (0: as requested)

// What the search remembers of a compiled combination.
struct Known {
  bool fits = false;
  std::vector<Bytes> peak;                  // per class
  std::vector<std::optional<Bytes>> margin;  // per class: by how much another combination's peak can be lower
};

class Search {
 public:
  Search(const RecomputeRequest& request, const CompileWithRecompute& compile, const cost::CostModel& cost)
      : request_(request), compile_(compile), cost_(cost), n_(request.requested.size()) {}

  RecomputeFit run();

 private:
  std::vector<ModuleRecompute> choice_of(const Rungs& rungs) const {
    std::vector<ModuleRecompute> c(n_);
    for (size_t m = 0; m < n_; ++m) c[m] = ladder_[m][static_cast<size_t>(rungs[m])];
    return c;
  }
  ir::Program build(const Rungs& rungs) {
    ++out_.programs_compiled;
    return compile_(choice_of(rungs));
  }
  // Compiles `rungs` (once) and remembers whether it fits.
  const Known& know(const Rungs& rungs, ir::Program* keep = nullptr);
  const Known& remember(const Rungs& rungs, const ir::Program& p);
  // b keeps no more of any layer than a, module by module.
  bool dominates(const Rungs& b, const Rungs& a) const {
    for (size_t m = 0; m < n_; ++m)
      if (!keeps_no_more(ladder_[m][static_cast<size_t>(a[m])], ladder_[m][static_cast<size_t>(b[m])])) return false;
    return true;
  }
  // A remembered combination proves `a` does not fit.
  bool proven_over(const Rungs& a) const;
  // Compiles combinations that keep less than `a` until one proves it does
  // not fit; false if none does.
  bool probe(const Rungs& a);
  void set_ladders(const ir::Program& requested);
  void set_costs(const ir::Program& requested, const ir::Program& top);

  const RecomputeRequest& request_;
  const CompileWithRecompute& compile_;
  const cost::CostModel& cost_;
  const size_t n_;
  RecomputeFit out_;
  Bytes capacity_;
  double fragmentation_ = 0;
  std::vector<std::vector<ModuleRecompute>> ladder_;  // per module, rungs from the requested one up
  std::vector<std::vector<int64_t>> cost_of_;          // per module and rung
  std::map<Rungs, Known> known_;
};

const Known& Search::remember(const Rungs& rungs, const ir::Program& p) {
  Known k;
  const cost::Feasibility f = cost::program_feasibility(p);
  k.fits = f.fits();
  const double frag = fragmentation_;
  const auto transient = recompute_transient_bytes(p);
  for (int32_t c = 0; c < p.classes_size(); ++c) {
    k.peak.push_back(cost::class_memory(p, c).peak);
    const int64_t t = transient[static_cast<size_t>(c)];  // -1: no bound
    // The activation peak of a combination keeping more is at least this
    // one's minus t; the allocator's reserve shrinks with it (+1: rounding).
    if (t < 0 || !request_.fixed_order) {
      k.margin.push_back(std::nullopt);
    } else {
      k.margin.push_back(Bytes(t) + cost::allocator_reserve_bytes(Bytes(t), frag) + Bytes(1));
    }
  }
  return known_[rungs] = std::move(k);
}

const Known& Search::know(const Rungs& rungs, ir::Program* keep) {
  if (const auto it = known_.find(rungs); it != known_.end() && keep == nullptr) return it->second;
  ir::Program p = build(rungs);
  const Known& k = remember(rungs, p);
  if (keep != nullptr) *keep = std::move(p);
  return k;
}

bool Search::proven_over(const Rungs& a) const {
  if (!request_.fixed_order || capacity_ <= Bytes::zero()) return false;
  for (const auto& [b, k] : known_) {
    if (!dominates(b, a)) continue;
    for (size_t c = 0; c < k.peak.size(); ++c)
      if (k.margin[c] && k.peak[c] - *k.margin[c] > capacity_) return true;
  }
  return false;
}

bool Search::probe(const Rungs& a) {
  if (!request_.fixed_order) return false;
  // Modules with the most rungs left above a's first: a proof there covers
  // the most combinations still to come.
  std::vector<size_t> modules(n_);
  std::iota(modules.begin(), modules.end(), 0);
  auto left = [&](size_t m) { return static_cast<int32_t>(ladder_[m].size()) - 1 - a[m]; };
  std::stable_sort(modules.begin(), modules.end(), [&](size_t x, size_t y) { return left(x) > left(y); });
  for (const size_t m : modules) {
    const int32_t top = static_cast<int32_t>(ladder_[m].size()) - 1;
    // The module's top rung, then halfway back towards a's: the closer to
    // a, the higher the peak and the likelier the proof.
    for (int32_t hi = top; hi > a[m];) {
      Rungs b = a;
      b[m] = hi;
      if (dominates(b, a)) {
        know(b);
        if (proven_over(a)) return true;
      }
      const int32_t mid = a[m] + (hi - a[m]) / 2;
      if (mid == a[m]) break;
      hi = mid;
    }
  }
  return false;
}

void Search::set_ladders(const ir::Program& requested) {
  ladder_.assign(n_, {});
  for (size_t m = 0; m < n_; ++m) {
    ladder_[m] = {request_.requested[m]};
    if (m >= request_.adjustable.size() || !request_.adjustable[m]) continue;
    const int64_t layers = max_chunk_layers(requested, static_cast<int32_t>(m));
    if (layers == 0) continue;  // no layer of the module on any rank
    const auto full = recompute_ladder(layers);
    const int32_t at = ladder_position(request_.requested[m], layers);
    for (size_t k = static_cast<size_t>(at) + 1; k < full.size(); ++k) ladder_[m].push_back(full[k]);
  }
}

void Search::set_costs(const ir::Program& requested, const ir::Program& top) {
  cost_of_.assign(n_, {});
  for (size_t m = 0; m < n_; ++m) {
    const int32_t module = static_cast<int32_t>(m);
    const int32_t last = static_cast<int32_t>(ladder_[m].size()) - 1;
    // The module at its top rung, the others as requested (the top
    // combination itself when this is the only module that moves).
    std::optional<ir::Program> axis_top;
    const ir::Program* full = &top;
    if (last > 0) {
      Rungs axis(n_, 0);
      axis[m] = last;
      bool others_move = false;
      for (size_t o = 0; o < n_; ++o) others_move |= o != m && ladder_[o].size() > 1;
      if (others_move) {
        axis_top.emplace();
        know(axis, &*axis_top);
        full = &*axis_top;
      }
    }
    for (int32_t k = 0; k <= last; ++k) {
      const ModuleRecompute& r = ladder_[m][static_cast<size_t>(k)];
      int64_t c = 0;
      if (r.mode == scenario::RECOMPUTE_FULL) {
        c = block_recompute_time_ns(*full, module, r.num_layers, cost_);
      } else if (r.mode == scenario::RECOMPUTE_SELECTIVE) {
        if (k == 0) {
          c = recompute_time_ns(requested, module, cost_);
        } else {
          Rungs axis(n_, 0);
          axis[m] = k;
          ir::Program p;
          know(axis, &p);
          c = recompute_time_ns(p, module, cost_);
        }
      }
      cost_of_[m].push_back(c);
    }
  }
}

RecomputeFit Search::run() {
  ir::Program requested = compile_(request_.requested);
  ++out_.programs_compiled;
  const cost::Feasibility f0 = cost::program_feasibility(requested);
  capacity_ = f0.capacity;
  fragmentation_ = cost::allocator_fragmentation(requested.cluster());
  if (f0.fits()) {
    out_.program = std::move(requested);
    out_.chosen = request_.requested;
    return out_;
  }
  set_ladders(requested);
  const Rungs start(n_, 0);
  remember(start, requested);
  Rungs top(n_, 0);
  for (size_t m = 0; m < n_; ++m) top[m] = static_cast<int32_t>(ladder_[m].size()) - 1;
  auto give_up = [&](ir::Program best, const Rungs& rungs) {
    out_.program = std::move(best);
    out_.chosen = choice_of(rungs);
    out_.fits = false;
    return out_;
  };
  if (top == start) return give_up(std::move(requested), start);
  ir::Program most;
  if (!know(top, &most).fits) {
    // Nothing fits: the lower of the two peaks reached.
    if (cost::program_feasibility(most).worst.peak <= f0.worst.peak) return give_up(std::move(most), top);
    return give_up(std::move(requested), start);
  }
  set_costs(requested, most);

  // Rungs of each module in cost order (ties: the lower rung first).
  std::vector<std::vector<int32_t>> order(n_);
  for (size_t m = 0; m < n_; ++m) {
    order[m].resize(ladder_[m].size());
    std::iota(order[m].begin(), order[m].end(), 0);
    std::stable_sort(order[m].begin(), order[m].end(), [&](int32_t a, int32_t b) {
      return cost_of_[m][static_cast<size_t>(a)] < cost_of_[m][static_cast<size_t>(b)];
    });
  }
  // Best-first over positions in those orders: a combination's predecessors
  // (one position less in one module) cost no more and have a smaller key
  // (cost, rungs), so combinations come out sorted by that key.
  using Key = std::pair<int64_t, Rungs>;
  struct Entry {
    Key key;
    std::vector<int32_t> at;  // positions in `order`
  };
  auto later = [](const Entry& a, const Entry& b) { return a.key > b.key; };
  std::priority_queue<Entry, std::vector<Entry>, decltype(later)> queue(later);
  std::set<std::vector<int32_t>> seen;
  auto push = [&](std::vector<int32_t> at) {
    if (!seen.insert(at).second) return;
    Rungs rungs(n_);
    int64_t total = 0;
    for (size_t m = 0; m < n_; ++m) {
      rungs[m] = order[m][static_cast<size_t>(at[m])];
      total += cost_of_[m][static_cast<size_t>(rungs[m])];
    }
    queue.push({{total, std::move(rungs)}, std::move(at)});
  };
  push(std::vector<int32_t>(n_, 0));
  while (!queue.empty()) {
    const Entry e = queue.top();
    queue.pop();
    const Rungs& rungs = e.key.second;
    std::optional<ir::Program> built;
    bool fits = false;
    if (const auto it = known_.find(rungs); it != known_.end()) {
      fits = it->second.fits;
    } else if (!proven_over(rungs) && !probe(rungs)) {
      built.emplace();
      fits = know(rungs, &*built).fits;
    }
    if (fits) {
      out_.chosen = choice_of(rungs);
      if (rungs == top) {
        out_.program = std::move(most);
      } else {
        out_.program = built ? std::move(*built) : build(rungs);
      }
      return out_;
    }
    for (size_t m = 0; m < n_; ++m) {
      if (e.at[m] + 1 >= static_cast<int32_t>(order[m].size())) continue;
      std::vector<int32_t> next = e.at;
      ++next[m];
      push(std::move(next));
    }
  }
  // Unreachable: the top combination fits and is enumerated.
  throw std::logic_error("fit_recompute: the fitting top combination was not enumerated");
}

}  // namespace

RecomputeFit fit_recompute(const RecomputeRequest& request, const CompileWithRecompute& compile,
                           const cost::CostModel& cost) {
  return Search(request, compile, cost).run();
}

namespace {

std::string gb(int64_t bytes) { return fmt::format("{:.2f} GB", static_cast<double>(bytes) * 1e-9); }

std::string recompute_words(scenario::Recompute mode, int64_t num_layers) {
  switch (mode) {
    case scenario::RECOMPUTE_NONE: return "no recompute";
    case scenario::RECOMPUTE_SELECTIVE: return "selective recompute";
    default: break;
  }
  if (num_layers > 0)
    return fmt::format("full recompute of the first {} layer{} of each chunk", num_layers, num_layers == 1 ? "" : "s");
  return "full recompute of every layer";
}

// Live activation bytes per module at the moment the class reaches its
// activation peak (per stream, summed over streams).
std::map<int32_t, int64_t> activations_at_peak(const ir::RankClass& cls) {
  std::map<int32_t, int64_t> total;
  for (const ir::Stream& st : cls.streams()) {
    std::map<int32_t, int64_t> live, at_peak;
    int64_t sum = 0, peak = 0;
    for (const ir::Op& op : st.ops()) {
      if (!op.has_compute() || op.compute().memory_delta_bytes() == 0) continue;
      live[op.module()] += op.compute().memory_delta_bytes();
      sum += op.compute().memory_delta_bytes();
      if (sum > peak) {
        peak = sum;
        at_peak = live;
      }
    }
    for (const auto& [m, b] : at_peak) total[m] += b;
  }
  return total;
}

}  // namespace

std::string infeasibility_reason(const ir::Program& program) {
  const cost::Feasibility f = cost::program_feasibility(program);
  if (f.fits()) return "";
  const ir::ProgramInfo& info = program.info();
  auto name = [&](int32_t m) {
    if (m >= 0 && m < info.modules_size()) return info.modules(m).name();
    return std::string(m == 0 ? "the LLM" : fmt::format("module {}", m));
  };
  const ir::RankClass& cls = program.classes(f.worst_class);
  std::string parts;
  std::vector<std::pair<int64_t, int32_t>> by_size;
  for (const auto& [m, bytes] : activations_at_peak(cls))
    if (bytes > 0) by_size.push_back({-bytes, m});
  std::sort(by_size.begin(), by_size.end());
  for (const auto& [neg, m] : by_size) parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", name(m), gb(-neg));
  std::string recompute;
  if (info.modules_size() > 0) {
    for (int32_t m = 0; m < info.modules_size(); ++m)
      recompute += fmt::format("{}{} {}", m == 0 ? "" : ", ", info.modules(m).name(),
                               recompute_words(info.modules(m).recompute(), info.modules(m).recompute_num_layers()));
  } else {
    recompute = recompute_words(info.recompute(), info.recompute_num_layers());
  }
  return fmt::format(
      "{} of {} ranks exceed HBM: rank {} peaks at {} > {} (model state {}, CUDA context and NCCL buffers {}, "
      "activations {}{} + allocator reserve {}) with {}",
      f.over_capacity_ranks, f.num_ranks, f.worst_rank, gb(f.worst.peak.count()), gb(f.capacity.count()),
      gb((f.worst.baseline - Bytes(cls.memory().other_bytes())).count()), gb(cls.memory().other_bytes()), gb(f.worst.activation_peak.count()),
      parts.empty() ? "" : " (" + parts + ")", gb(f.worst.reserve.count()), recompute);
}

}  // namespace lacuna::placement
