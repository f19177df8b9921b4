#include "sim/cost/kernel_efficiency.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <queue>
#include <string>

#include "sim/core/error.h"
#include "sim/core/int_math.h"

namespace lacuna::cost {
namespace {

constexpr const char* kPrefix = "cluster.gpu.shape_model.";

[[noreturn]] void bad(const std::string& field, const std::string& what, const std::string& fix) {
  SourceLocation where;
  where.field = kPrefix + field;
  throw Error(where, what, fix);
}

// Σ_{x=1..n} min(x, cap) for n ≥ 0 (0 for n ≤ 0): the keys seen by the first
// n query rows of a causal band whose width is capped at `cap`.
double capped_triangle(int64_t n, int64_t cap) {
  if (n <= 0) return 0;
  const double nd = static_cast<double>(n), c = static_cast<double>(cap);
  if (n <= cap) return nd * (nd + 1) / 2;
  return c * (c + 1) / 2 + (nd - c) * c;
}

// Above this many CTAs (≥ 1000 per SM on any GPU lacuna accepts) the wave
// tail is a negligible part of the makespan, which is then taken as the fluid
// bound instead of simulating every CTA.
constexpr int64_t kExactScheduleLimit = int64_t{1} << 20;

}  // namespace

KernelEfficiency::KernelEfficiency(const scenario::KernelShapeModel& model, int64_t num_sms)
    : flat_(model.has_flat() && model.flat()), sms_(num_sms) {
  const int64_t default_ctas = model.has_gemm_ctas_per_sm() ? model.gemm_ctas_per_sm() : 1;
  if (model.has_gemm_ctas_per_sm() && !(default_ctas >= 1 && default_ctas <= 64))
    bad("gemm_ctas_per_sm", "must be in [1, 64], got " + std::to_string(default_ctas),
        "CTAs of one GEMM tile resident on an SM, e.g. 1 for cuBLAS's 256×128 tiles");
  for (int i = 0; i < model.gemm_tiles_size(); ++i) {
    const scenario::GemmTile& t = model.gemm_tiles(i);
    const std::string p = "gemm_tiles[" + std::to_string(i) + "]";
    if (!(t.m() >= 1 && t.m() <= 1024) || !(t.n() >= 1 && t.n() <= 1024))
      bad(p, "tile " + std::to_string(t.m()) + "×" + std::to_string(t.n()) + " must have m and n in [1, 1024]",
          "the output rows × columns one CTA computes, e.g. { m: 256 n: 128 }");
    if (!(t.ctas_per_sm() >= 0 && t.ctas_per_sm() <= 64))
      bad(p + ".ctas_per_sm", "must be in [0, 64], got " + std::to_string(t.ctas_per_sm()),
          "0 takes gemm_ctas_per_sm");
    tiles_.push_back(Tile{t.m(), t.n(), t.ctas_per_sm() > 0 ? t.ctas_per_sm() : default_ctas});
  }
  if (model.has_gemm_k_overhead()) {
    k_overhead_ = model.gemm_k_overhead();
    if (!(k_overhead_ >= 0) || !std::isfinite(k_overhead_))
      bad("gemm_k_overhead", "must be a finite number ≥ 0", "a tile's prologue + epilogue in K, e.g. 74");
  }
  if (model.has_gemm_max_split_k()) {
    max_split_k_ = model.gemm_max_split_k();
    if (!(max_split_k_ >= 1 && max_split_k_ <= 64))
      bad("gemm_max_split_k", "must be in [1, 64], got " + std::to_string(max_split_k_), "1 disables split-K");
  }
  if (model.has_attention_block_q()) {
    block_q_ = model.attention_block_q();
    if (!(block_q_ >= 1 && block_q_ <= 1024))
      bad("attention_block_q", "must be in [1, 1024], got " + std::to_string(block_q_),
          "query rows per FlashAttention CTA, e.g. 128");
  }
  if (model.has_attention_kv_overhead()) {
    kv_overhead_ = model.attention_kv_overhead();
    if (!(kv_overhead_ >= 0) || !std::isfinite(kv_overhead_))
      bad("attention_kv_overhead", "must be a finite number ≥ 0", "a CTA's prologue + epilogue in keys, e.g. 184");
  }
  if (model.has_attention_head_dim_overhead()) {
    head_dim_overhead_ = model.attention_head_dim_overhead();
    if (!(head_dim_overhead_ >= 0) || !std::isfinite(head_dim_overhead_))
      bad("attention_head_dim_overhead", "must be a finite number ≥ 0", "e.g. 23");
  }
  if ((gemm_by_shape() || attention_by_shape()) && !(sms_ >= 1)) {
    throw Error(SourceLocation{{}, 0, 0, "cluster.gpu.num_sms"},
                "must be set (≥ 1) for the per-shape kernel model: waves are counted over the SMs",
                "e.g. 132 for H100 SXM, or set cluster.gpu.shape_model.flat: true");
  }
}

double KernelEfficiency::factor(const ir::Compute& op) const {
  if (flat_) return 1;
  const auto& s = op.shape();
  if (op.op_class() == ir::GEMM && gemm_by_shape() && s.size() >= 3) {
    return gemm(s[0], s[1], s[2], s.size() >= 4 ? s[3] : 1).factor;
  }
  if (op.op_class() == ir::ATTENTION && attention_by_shape() && s.size() >= 6) {
    return attention(s[0], s[1], s[2], s[3], s[4], s[5] != 0, s.size() >= 8 ? s[7] : 0).factor;
  }
  return 1;
}

GemmShapeFactor KernelEfficiency::gemm(int64_t m, int64_t n, int64_t k, int64_t batch) const {
  GemmShapeFactor best;
  if (!gemm_by_shape() || m <= 0 || n <= 0 || k <= 0 || batch <= 0) return best;  // no work: no shape term
  best.factor = 0;
  const double kd = static_cast<double>(k);
  for (size_t i = 0; i < tiles_.size(); ++i) {
    const Tile& t = tiles_[i];
    const int64_t gm = ceil_div(m, t.m), gn = ceil_div(n, t.n);
    const double tile_fill = static_cast<double>(m) * static_cast<double>(n) /
                             (static_cast<double>(gm * t.m) * static_cast<double>(gn * t.n));
    const int64_t tiles = gm * gn * batch;
    const int64_t slots = sms_ * t.ctas_per_sm;
    // Split-K only while the tiles alone leave SMs idle (cuBLAS splits K to
    // fill the GPU with few output tiles); each split pays its own prologue
    // and epilogue through the K ramp, which is what bounds it.
    const int64_t splits = tiles < slots ? max_split_k_ : 1;
    for (int64_t split = 1; split <= splits; ++split) {
      const int64_t ctas = tiles * split;
      const int64_t waves = ceil_div(ctas, slots);
      const double wave_fill = static_cast<double>(ctas) / static_cast<double>(waves * slots);
      const double k_part = kd / static_cast<double>(split);
      const double k_ramp = k_part / (k_part + k_overhead_);
      const double f = tile_fill * wave_fill * k_ramp;
      if (f > best.factor) {  // ties keep the earlier tile and the smaller split
        best = GemmShapeFactor{f, static_cast<int>(i), split, ctas, slots, tile_fill, wave_fill, k_ramp};
      }
    }
  }
  return best;
}

AttentionShapeFactor KernelEfficiency::attention(int64_t batch, int64_t heads, int64_t seq_q, int64_t seq_kv,
                                                 int64_t head_dim, bool causal, int64_t window) const {
  AttentionShapeFactor out;
  if (!attention_by_shape() || batch <= 0 || heads <= 0 || seq_q <= 0 || seq_kv <= 0 || head_dim <= 0) return out;
  if (window >= seq_kv || window < 0) window = 0;  // a window as wide as the keys is full attention

  const std::vector<int64_t> key{batch, heads, seq_q, seq_kv, head_dim, causal ? 1 : 0, window};
  {
    std::lock_guard<std::mutex> lock(memo_->mu);
    if (auto it = memo_->attention.find(key); it != memo_->attention.end()) return it->second;
  }

  // One CTA per (batch, head, block of block_q queries). A CTA costs the keys
  // it visits plus kv_overhead, in units of one key against a full block of
  // queries; a partial last block costs as much as a full one (its tiles are
  // full-size). Causal queries are the last seq_q positions of seq_kv
  // (FlashAttention's bottom-right alignment), and the diagonal key blocks are
  // visited whole although half masked: that waste is why short causal
  // sequences are slower.
  const int64_t bq = block_q_;
  const int64_t blocks = ceil_div(seq_q, bq);
  const int64_t offset = seq_kv - seq_q;
  const int64_t cap = window > 0 ? window : seq_kv;
  std::vector<double> cost(static_cast<size_t>(blocks));
  double useful_per_head = 0;  // Σ over blocks of (attended key·rows) / block_q
  for (int64_t j = 0; j < blocks; ++j) {
    const int64_t rows = std::min(bq, seq_q - j * bq);
    const int64_t lo = offset + j * bq, hi = lo + rows - 1;  // key positions of the block's first and last query
    int64_t visited;
    double pairs;
    if (causal) {
      const int64_t first = window > 0 ? std::max<int64_t>(0, lo - window + 1) : 0;
      visited = std::max<int64_t>(0, std::min(seq_kv - 1, hi) - first + 1);
      // Query at position p sees min(p + 1, cap) keys (none when p < 0).
      pairs = capped_triangle(hi + 1, cap) - capped_triangle(lo, cap);
    } else {
      visited = window > 0 ? std::min(seq_kv, window + rows - 1) : seq_kv;
      pairs = static_cast<double>(rows) * static_cast<double>(cap);
    }
    cost[static_cast<size_t>(j)] = static_cast<double>(visited) + kv_overhead_;
    useful_per_head += pairs / static_cast<double>(bq);
  }
  const int64_t copies = batch * heads;
  const double useful = useful_per_head * static_cast<double>(copies);
  out.ctas = copies * blocks;
  if (!(useful > 0)) {
    std::lock_guard<std::mutex> lock(memo_->mu);
    return memo_->attention.emplace(key, out).first->second;  // nothing attended: no shape term
  }

  // The hardware starts CTAs as SMs free up; with the blocks ordered longest
  // first (as FlashAttention-3 and cuDNN order causal work), that is Graham's
  // longest-processing-time list schedule over the SMs, one CTA per SM.
  std::stable_sort(cost.begin(), cost.end(), std::greater<double>());
  double makespan = 0;
  const double total = [&] {
    double t = 0;
    for (double c : cost) t += c;
    return t * static_cast<double>(copies);
  }();
  if (out.ctas <= sms_) {
    makespan = cost.front();
  } else if (out.ctas > kExactScheduleLimit) {
    makespan = std::max(total / static_cast<double>(sms_), cost.front());
  } else {
    std::priority_queue<double, std::vector<double>, std::greater<double>> loads;
    for (int64_t i = 0; i < sms_; ++i) loads.push(0.0);
    for (double c : cost) {
      for (int64_t r = 0; r < copies; ++r) {
        const double next = loads.top() + c;
        loads.pop();
        loads.push(next);
        makespan = std::max(makespan, next);
      }
    }
  }
  out.block_fill = std::min(1.0, useful / (static_cast<double>(sms_) * makespan));
  const double d = static_cast<double>(head_dim);
  out.head_dim_ramp = d / (d + head_dim_overhead_);
  out.factor = out.block_fill * out.head_dim_ramp;

  std::lock_guard<std::mutex> lock(memo_->mu);
  return memo_->attention.emplace(key, out).first->second;
}

}  // namespace lacuna::cost
