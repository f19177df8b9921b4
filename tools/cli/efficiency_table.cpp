#include "tools/cli/efficiency_table.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include <fmt/format.h>

#include "sim/proto/program.pb.h"
#include "sim/scenario/scenario.h"
#include "tools/cli/published_kernel_figures.h"

namespace lacuna::cli {
namespace {

// FlashAttention's benchmark setup (flash-attention README; FA3 paper): the
// batch keeps 16k tokens and the hidden size is 2048.
constexpr int64_t kBenchTokens = 16384;
constexpr int64_t kBenchHidden = 2048;

double attention_forward_flops(int64_t seq, int64_t head_dim, bool causal) {
  const double b = static_cast<double>(kBenchTokens / seq), h = static_cast<double>(kBenchHidden / head_dim);
  const double full = 4.0 * b * static_cast<double>(seq) * static_cast<double>(seq) * h * static_cast<double>(head_dim);
  return causal ? full / 2 : full;
}

std::vector<int64_t> attention_shape(int64_t seq, int64_t head_dim, bool causal) {
  const int64_t heads = kBenchHidden / head_dim;
  return {kBenchTokens / seq, heads, seq, seq, head_dim, causal ? 1 : 0, heads};
}

}  // namespace

EfficiencyTable::EfficiencyTable(const std::string& preset)
    : preset_(preset),
      gpu_(scenario::hardware_preset(preset).gpu()),
      roofline_(gpu_, scenario::BF16),
      peak_(scenario::peak_flops_per_s(gpu_, scenario::BF16)) {}

double EfficiencyTable::seconds(int op_class, const std::vector<int64_t>& shape, double flops) const {
  ir::Compute op;
  op.set_op_class(static_cast<ir::OpClass>(op_class));
  for (int64_t d : shape) op.add_shape(d);
  op.set_flops(flops);
  // Compute-bound by construction: the comparison is about the FLOP roof.
  return roofline_.time(op).seconds();
}

GemmRow EfficiencyTable::gemm(const std::string& label, int64_t m, int64_t n, int64_t k) const {
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const double s = seconds(ir::GEMM, {m, n, k}, flops);
  GemmRow r{label, m, n, k, 0, 0, roofline_.shapes().gemm(m, n, k), 0, 0};
  r.tflops = flops / s / 1e12;
  r.efficiency = flops / s / peak_;
  return r;
}

std::vector<GemmRow> EfficiencyTable::square_gemms() const {
  std::vector<GemmRow> rows;
  for (int64_t n = 512; n <= 16384; n += n < 4096 ? 256 : 1024) rows.push_back(gemm("square", n, n, n));
  return rows;
}

std::vector<GemmRow> EfficiencyTable::layer_gemms(const std::vector<int64_t>& tokens, const std::vector<int64_t>& hidden,
                                                  const std::vector<int64_t>& tp) const {
  std::vector<GemmRow> rows;
  for (int64_t m : tokens) {
    for (int64_t h : hidden) {
      for (int64_t t : tp) {
        // Megatron's column- then row-parallel linears with a 4h MLP.
        for (auto [label, n, k] : {std::tuple<const char*, int64_t, int64_t>{"qkv", 3 * h / t, h},
                                   {"proj", h, h / t},
                                   {"fc1", 4 * h / t, h},
                                   {"fc2", h, 4 * h / t}}) {
          GemmRow r = gemm(label, m, n, k);
          r.hidden = h;
          r.tp = t;
          rows.push_back(r);
        }
      }
    }
  }
  return rows;
}

AttentionRow EfficiencyTable::attention_row(int64_t seq, int64_t head_dim, bool causal) const {
  const std::vector<int64_t> shape = attention_shape(seq, head_dim, causal);
  const double flops = attention_forward_flops(seq, head_dim, causal);
  const double s = seconds(ir::ATTENTION, shape, flops);
  AttentionRow r{seq, head_dim, causal,
                 roofline_.shapes().attention(shape[0], shape[1], seq, seq, head_dim, causal), flops / s / peak_,
                 flops / s / 1e12};
  return r;
}

std::vector<AttentionRow> EfficiencyTable::attention() const {
  std::vector<AttentionRow> rows;
  for (bool causal : {false, true})
    for (int64_t d : {64, 128})
      for (int64_t seq = 512; seq <= 16384; seq *= 2) rows.push_back(attention_row(seq, d, causal));
  return rows;
}

std::vector<ComparisonRow> EfficiencyTable::comparison() const {
  std::vector<ComparisonRow> rows;
  for (const PublishedGemm& p : published_gemms()) {
    if (p.preset != preset_) continue;
    const GemmRow g = gemm("published", p.m, p.n, p.k);
    ComparisonRow r;
    r.kind = "GEMM";
    r.what = fmt::format("{}×{}×{}", p.m, p.n, p.k);
    r.predicted = g.tflops;
    r.published = p.tflops;
    r.error = (g.tflops - p.tflops) / p.tflops;
    r.source = p.source;
    r.derives = p.derives;
    r.m = p.m;
    r.n = p.n;
    r.k = p.k;
    rows.push_back(r);
  }
  for (const PublishedAttention& p : published_attention()) {
    if (p.preset != preset_) continue;
    const std::vector<int64_t> shape = attention_shape(p.seq, p.head_dim, p.causal);
    const double fwd = attention_forward_flops(p.seq, p.head_dim, p.causal);
    // lacuna's backward kernel: 2.5× the forward FLOPs, same shape (sim/model).
    const double t = p.pass == "fwd" ? seconds(ir::ATTENTION, shape, fwd)
                                     : seconds(ir::ATTENTION, shape, fwd) + seconds(ir::ATTENTION, shape, 2.5 * fwd);
    const double flops = p.pass == "fwd" ? fwd : 3.5 * fwd;
    const double predicted = flops / t / 1e12;
    ComparisonRow r;
    r.kind = "ATTENTION";
    r.what = fmt::format("{} {} s={} d={}{}", p.kernel, p.pass, p.seq, p.head_dim, p.causal ? " causal" : "");
    r.predicted = predicted;
    r.published = p.tflops;
    r.error = (predicted - p.tflops) / p.tflops;
    r.source = p.source;
    r.derives = p.derives;
    r.seq = p.seq;
    r.head_dim = p.head_dim;
    r.causal = p.causal;
    r.pass = p.pass;
    rows.push_back(r);
  }
  return rows;
}

ErrorSummary summarize(const std::vector<ComparisonRow>& rows, const std::string& kind, bool include_derived) {
  ErrorSummary s;
  double sum = 0;
  for (const ComparisonRow& r : rows) {
    if (r.kind != kind || (r.derives && !include_derived)) continue;
    ++s.count;
    sum += std::abs(r.error);
    s.max_abs = std::max(s.max_abs, std::abs(r.error));
  }
  if (s.count > 0) s.mean_abs = sum / s.count;
  return s;
}

}  // namespace lacuna::cli
