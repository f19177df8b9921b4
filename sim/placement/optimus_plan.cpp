#include "sim/placement/optimus_plan.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace lacuna::placement::optimus {
namespace {

std::vector<int32_t> divisors(int32_t n) {
  std::vector<int32_t> out;
  for (int32_t d = 1; d <= n; ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

// Compositions of n into m parts each ≥ lo, lexicographic, at most `cap`
// (the caller only asks when the count is ≤ cap).
void compositions(int32_t n, int32_t m, int32_t lo, std::vector<int32_t>& cur,
                  std::vector<std::vector<int32_t>>& out) {
  const int32_t k = static_cast<int32_t>(cur.size());
  if (k == m - 1) {
    cur.push_back(n);
    out.push_back(cur);
    cur.pop_back();
    return;
  }
  const int32_t rest = m - k - 1;  // parts after this one
  for (int32_t v = lo; v <= n - rest * lo; ++v) {
    cur.push_back(v);
    compositions(n - v, m, lo, cur, out);
    cur.pop_back();
  }
}

}  // namespace

std::vector<Geometry> enumerate_geometries(int32_t tp_llm, int32_t pp_llm, int32_t dp_llm, int64_t max_layers) {
  std::vector<Geometry> out;
  for (int32_t pp : divisors(pp_llm)) {
    if (pp > max_layers) continue;
    for (int32_t tp : divisors(tp_llm)) {
      Geometry g;
      g.tp_llm = tp_llm;
      g.pp_llm = pp_llm;
      g.dp_llm = dp_llm;
      g.tp_enc = tp;
      g.pp_enc = pp;
      out.push_back(g);
    }
  }
  return out;
}

StageLayers stage_layers(int64_t layers, int32_t pp, int32_t j) {
  const int64_t base = layers / pp, extra = layers % pp;
  StageLayers s;
  s.count = base + (j < extra ? 1 : 0);
  s.first = j * base + std::min<int64_t>(j, extra);
  return s;
}

uint64_t count_splits(int32_t n, int32_t m, int32_t min_part) {
  // Compositions of n into m parts ≥ min_part: C(n − m·min_part + m − 1, m − 1).
  const int64_t free = static_cast<int64_t>(n) - static_cast<int64_t>(m) * min_part;
  if (m <= 0 || free < 0) return 0;
  const uint64_t top = static_cast<uint64_t>(free + m - 1);
  uint64_t k = static_cast<uint64_t>(m - 1);
  if (k > top - k) k = top - k;
  // C(top, k) incrementally; every intermediate is itself a binomial, so it
  // divides exactly. Saturate on overflow.
  unsigned __int128 c = 1;
  for (uint64_t i = 1; i <= k; ++i) {
    c = c * (top - k + i) / i;
    if (c > std::numeric_limits<uint64_t>::max()) return std::numeric_limits<uint64_t>::max();
  }
  return static_cast<uint64_t>(c);
}

std::vector<std::vector<int32_t>> enumerate_splits(int32_t n, int32_t m, int64_t cap,
                                                   const std::vector<int64_t>& bubble_ns) {
  const int32_t lo = m <= n ? 1 : 0;
  std::vector<std::vector<int32_t>> out;
  if (m <= 0 || cap <= 0) return out;
  if (count_splits(n, m, lo) <= static_cast<uint64_t>(cap)) {
    std::vector<int32_t> cur;
    compositions(n, m, lo, cur, out);
    return out;
  }
  // Balanced: n / m each; the remainder to the pipelines with the most
  // bubble time (they can absorb an extra microbatch best).
  std::vector<int32_t> balanced(static_cast<size_t>(m), n / m);
  std::vector<int32_t> order(static_cast<size_t>(m));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    const int64_t x = a < static_cast<int32_t>(bubble_ns.size()) ? bubble_ns[static_cast<size_t>(a)] : 0;
    const int64_t y = b < static_cast<int32_t>(bubble_ns.size()) ? bubble_ns[static_cast<size_t>(b)] : 0;
    return x > y;
  });
  for (int32_t i = 0; i < n % m; ++i) ++balanced[static_cast<size_t>(order[static_cast<size_t>(i)])];
  out.push_back(balanced);
  for (int32_t a = 0; a < m && static_cast<int64_t>(out.size()) < cap; ++a) {
    if (balanced[static_cast<size_t>(a)] - 1 < lo) continue;
    for (int32_t b = 0; b < m && static_cast<int64_t>(out.size()) < cap; ++b) {
      if (a == b) continue;
      auto s = balanced;
      --s[static_cast<size_t>(a)];
      ++s[static_cast<size_t>(b)];
      out.push_back(std::move(s));
    }
  }
  return out;
}

double paper_model_memory_bytes(double k, int64_t dp_enc, double phi_enc, int64_t dp_llm, double phi_llm,
                                int64_t n_gpu) {
  return k * (static_cast<double>(dp_enc) * phi_enc + static_cast<double>(dp_llm) * phi_llm) /
         static_cast<double>(n_gpu);
}

double paper_memory_overhead_bytes(double k, int64_t dp_enc, int64_t dp_llm, double phi_enc, int64_t n_gpu) {
  return k * static_cast<double>(dp_enc - dp_llm) * phi_enc / static_cast<double>(n_gpu);
}

}  // namespace lacuna::placement::optimus
