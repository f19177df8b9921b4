// `lacuna efficiency`: a preset's predicted kernel efficiency against shape
// (docs/cost-model.md#per-shape-efficiency), checked against published
// cuBLAS and FlashAttention throughputs; optional SVG plot and CSV.
#include <fstream>
#include <map>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "sim/core/atomic_file.h"
#include "sim/core/error.h"
#include "sim/scenario/scenario.h"
#include "tools/cli/commands.h"
#include "tools/cli/efficiency_svg.h"
#include "tools/cli/efficiency_table.h"
#include "tools/cli/output_checks.h"

namespace lacuna::cli {
namespace {

struct Options {
  std::string preset = "h100-sxm";
  std::string svg;
  std::string csv;
};

const std::vector<int64_t> kTokens = {4096, 8192, 16384};
const std::vector<int64_t> kHidden = {4096, 8192, 12288, 16384, 25600};
const std::vector<int64_t> kTp = {1, 2, 4, 8};

std::string tile_name(const scenario::GpuSpec& gpu, const cost::GemmShapeFactor& g) {
  if (g.tile < 0) return "-";
  const auto& t = gpu.shape_model().gemm_tiles(g.tile);
  return fmt::format("{}x{}", t.m(), t.n());
}

void write_file(const std::string& path, const std::string& text) { write_file_atomically(path, text); }

void print_header(const EfficiencyTable& t) {
  const scenario::GpuSpec& g = t.gpu();
  const scenario::KernelShapeModel& s = g.shape_model();
  fmt::print("Predicted kernel efficiency against shape: preset {} ({}, {} SMs, BF16 peak {:.0f} TFLOP/s)\n",
             t.preset(), g.name(), g.num_sms(), g.peak_bf16_tflops());
  fmt::print("Class efficiency at the best shape: GEMM {:.2f}, ATTENTION {:.2f}; every kernel also pays "
             "kernel_overhead_us {:g} (the floor of a small kernel).\n",
             g.efficiency().at("GEMM").flops(), g.efficiency().at("ATTENTION").flops(), g.kernel_overhead_us());
  std::string tiles;
  for (const auto& tile : s.gemm_tiles())
    tiles += fmt::format("{}{}x{} ({}/SM)", tiles.empty() ? "" : ", ", tile.m(), tile.n(),
                         tile.ctas_per_sm() > 0 ? tile.ctas_per_sm() : s.gemm_ctas_per_sm());
  fmt::print("Shape model: GEMM tiles {}; K overhead {:g}; split-K up to {}; attention block {} queries, "
             "K/V overhead {:g} keys, head-dim overhead {:g}{}.\n\n",
             tiles, s.gemm_k_overhead(), s.gemm_max_split_k(), s.attention_block_q(), s.attention_kv_overhead(),
             s.attention_head_dim_overhead(), s.flat() ? " (flat: shapes ignored)" : "");
}

void print_squares(const EfficiencyTable& t, const std::vector<GemmRow>& rows) {
  fmt::print("GEMM, M = N = K (efficiency = achieved / peak, launch overhead included)\n");
  fmt::print("{:>7} {:>8} {:>5} {:>6} {:>10} {:>7} {:>7} {:>6} {:>8}\n", "size", "tile", "split", "CTAs", "wave fill",
             "k ramp", "shape", "eff", "TFLOP/s");
  for (const GemmRow& r : rows) {
    fmt::print("{:>7} {:>8} {:>5} {:>6} {:>10.3f} {:>7.3f} {:>7.3f} {:>6.3f} {:>8.1f}\n", r.m,
               tile_name(t.gpu(), r.shape), r.shape.split_k, r.shape.ctas, r.shape.wave_fill, r.shape.k_ramp,
               r.shape.factor, r.efficiency, r.tflops);
  }
  fmt::print("\n");
}

void print_layers(const std::vector<GemmRow>& rows) {
  fmt::print("GEMM, one transformer layer's forward (M = tokens; QKV N = 3h/tp, K = h; proj N = h, K = h/tp; "
             "FC1 N = 4h/tp, K = h; FC2 N = h, K = 4h/tp): efficiency\n");
  fmt::print("{:>7} {:>7} {:>3} {:>6} {:>6} {:>6} {:>6}\n", "tokens", "hidden", "tp", "qkv", "proj", "fc1", "fc2");
  for (size_t i = 0; i + 3 < rows.size(); i += 4) {
    fmt::print("{:>7} {:>7} {:>3} {:>6.3f} {:>6.3f} {:>6.3f} {:>6.3f}\n", rows[i].m, rows[i].hidden, rows[i].tp,
               rows[i].efficiency, rows[i + 1].efficiency, rows[i + 2].efficiency, rows[i + 3].efficiency);
  }
  fmt::print("\n");
}

void print_attention(const std::vector<AttentionRow>& rows) {
  fmt::print("Attention, FlashAttention's benchmark (batch x seq = 16k tokens, hidden 2048), forward kernel\n");
  fmt::print("{:>6} {:>4} {:>7} {:>6} {:>10} {:>7} {:>6} {:>8}\n", "seq", "d", "causal", "CTAs", "block fill",
             "d ramp", "eff", "TFLOP/s");
  for (const AttentionRow& r : rows) {
    fmt::print("{:>6} {:>4} {:>7} {:>6} {:>10.3f} {:>7.3f} {:>6.3f} {:>8.1f}\n", r.seq, r.head_dim,
               r.causal ? "yes" : "no", r.shape.ctas, r.shape.block_fill, r.shape.head_dim_ramp, r.efficiency,
               r.tflops);
  }
  fmt::print("\n");
}

void print_comparison(const std::vector<ComparisonRow>& rows) {
  fmt::print("Predicted vs published (TFLOP/s); role \"derive\": a preset parameter was derived from it\n");
  if (rows.empty()) {
    fmt::print("  no published kernel figures for this GPU (H200: none found; MAMF lists it as H100's)\n\n");
    return;
  }
  fmt::print("{:<9} {:<34} {:>9} {:>9} {:>7} {:<6} {}\n", "kind", "shape", "predicted", "published", "error", "role",
             "source");
  for (const ComparisonRow& r : rows) {
    fmt::print("{:<9} {:<34} {:>9.1f} {:>9.1f} {:>+6.1f}% {:<6} {}\n", r.kind, r.what, r.predicted, r.published,
               100 * r.error, r.derives ? "derive" : "check", r.source);
  }
  for (const char* kind : {"GEMM", "ATTENTION"}) {
    const ErrorSummary c = summarize(rows, kind, false), a = summarize(rows, kind, true);
    fmt::print("{} |error|: checks n={} mean {:.1f}% max {:.1f}%; all n={} mean {:.1f}% max {:.1f}%\n", kind, c.count,
               100 * c.mean_abs, 100 * c.max_abs, a.count, 100 * a.mean_abs, 100 * a.max_abs);
  }
  fmt::print("\n");
}

std::string csv_text(const EfficiencyTable& t, const std::vector<GemmRow>& squares, const std::vector<GemmRow>& layers,
                     const std::vector<AttentionRow>& attention, const std::vector<ComparisonRow>& comparison) {
  std::string out =
      "section,preset,label,m,n,k,hidden,tp,seq,head_dim,causal,tile,split_k,ctas,shape_factor,efficiency,"
      "predicted_tflops,published_tflops,error,role,source\n";
  auto gemm = [&](const char* section, const GemmRow& r) {
    out += fmt::format("{},{},{},{},{},{},{},{},,,,{},{},{},{:.6f},{:.6f},{:.3f},,,,\n", section, t.preset(), r.label,
                       r.m, r.n, r.k, r.hidden, r.tp, tile_name(t.gpu(), r.shape), r.shape.split_k, r.shape.ctas,
                       r.shape.factor, r.efficiency, r.tflops);
  };
  for (const GemmRow& r : squares) gemm("gemm_square", r);
  for (const GemmRow& r : layers) gemm("gemm_layer", r);
  for (const AttentionRow& r : attention) {
    out += fmt::format("attention,{},flash,,,,,,{},{},{},,,{},{:.6f},{:.6f},{:.3f},,,,\n", t.preset(), r.seq,
                       r.head_dim, r.causal ? 1 : 0, r.shape.ctas, r.shape.factor, r.efficiency, r.tflops);
  }
  for (const ComparisonRow& r : comparison) {
    out += fmt::format("published,{},\"{}\",,,,,,,,,,,,,,{:.3f},{:.3f},{:.5f},{},\"{}\"\n", t.preset(), r.kind + " " + r.what,
                       r.predicted, r.published, r.error, r.derives ? "derive" : "check", r.source);
  }
  return out;
}

std::string svg_text(const EfficiencyTable& t, const std::vector<GemmRow>& squares,
                     const std::vector<AttentionRow>& attention) {
  const double peak = t.gpu().peak_bf16_tflops();
  ChartPanel gemm{"GEMM, M = N = K", "M = N = K", true, {}};
  ChartSeries model{"lacuna", "#1f77b4", false, false, {}};
  for (const GemmRow& r : squares) model.points.emplace_back(static_cast<double>(r.m), r.efficiency);
  gemm.series.push_back(model);
  ChartSeries published{"published (cuBLAS)", "#ff7f0e", true, false, {}};
  for (const ComparisonRow& r : t.comparison())
    if (r.kind == "GEMM" && r.m == r.n && r.n == r.k && r.m >= 512)
      published.points.emplace_back(static_cast<double>(r.m), r.published / peak);
  if (!published.points.empty()) gemm.series.push_back(published);

  ChartPanel layer{"Attention projection GEMM, 8192 tokens (K = h/tp)", "tensor parallelism tp", true, {}};
  const char* colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"};
  int c = 0;
  for (int64_t h : kHidden) {
    ChartSeries s{fmt::format("h = {}", h), colors[c++ % 5], false, false, {}};
    for (const GemmRow& r : t.layer_gemms({8192}, {h}, kTp))
      if (r.label == "proj") s.points.emplace_back(static_cast<double>(r.tp), r.efficiency);
    layer.series.push_back(s);
  }

  ChartPanel attn{"Attention, 16k tokens, hidden 2048", "sequence length", true, {}};
  std::map<std::string, std::string> color = {
      {"64/0", "#1f77b4"}, {"128/0", "#ff7f0e"}, {"64/1", "#2ca02c"}, {"128/1", "#d62728"}};
  for (bool causal : {false, true}) {
    for (int64_t d : {64, 128}) {
      const std::string key = fmt::format("{}/{}", d, causal ? 1 : 0);
      ChartSeries s{fmt::format("d {}{}", d, causal ? " causal" : ""), color[key], false, causal, {}};
      for (const AttentionRow& r : attention)
        if (r.head_dim == d && r.causal == causal) s.points.emplace_back(static_cast<double>(r.seq), r.efficiency);
      attn.series.push_back(s);
    }
  }
  for (bool causal : {false, true}) {
    for (int64_t d : {64, 128}) {
      const std::string key = fmt::format("{}/{}", d, causal ? 1 : 0);
      ChartSeries s{fmt::format("published fwd+bwd d {}{}", d, causal ? " causal" : ""), color[key], true, false, {}};
      for (const ComparisonRow& r : t.comparison())
        if (r.kind == "ATTENTION" && r.pass == "fwd+bwd" && r.causal == causal && r.head_dim == d)
          s.points.emplace_back(static_cast<double>(r.seq), r.published / peak);
      if (!s.points.empty()) attn.series.push_back(s);
    }
  }
  return efficiency_chart(
      fmt::format("Predicted kernel efficiency against shape: {} ({})", t.preset(), t.gpu().name()),
      "achieved / BF16 peak, as lacuna times the kernel (launch overhead included); written by `lacuna efficiency`",
      {gemm, layer, attn});
}

int run_efficiency(const Options& o) {
  const EfficiencyTable t(o.preset);
  const std::vector<GemmRow> squares = t.square_gemms();
  const std::vector<GemmRow> layers = t.layer_gemms(kTokens, kHidden, kTp);
  const std::vector<AttentionRow> attention = t.attention();
  const std::vector<ComparisonRow> comparison = t.comparison();
  print_header(t);
  print_squares(t, squares);
  print_layers(layers);
  print_attention(attention);
  print_comparison(comparison);
  if (!o.csv.empty()) {
    write_file(o.csv, csv_text(t, squares, layers, attention, comparison));
    fmt::print("wrote {}\n", o.csv);
  }
  if (!o.svg.empty()) {
    write_file(o.svg, svg_text(t, squares, attention));
    fmt::print("wrote {}\n", o.svg);
  }
  return 0;
}

}  // namespace

void add_efficiency_command(CLI::App& app, Action& action) {
  auto opts = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("efficiency",
                                 "Predicted kernel efficiency against shape (GEMM, attention) for a hardware preset, "
                                 "checked against published cuBLAS and FlashAttention figures");
  cmd->add_option("--preset", opts->preset, "hardware preset (lacuna presets lists them)")
      ->capture_default_str();
  cmd->add_option("--svg", opts->svg, "write the efficiency plot to this SVG file")->check(output_file());
  cmd->add_option("--csv", opts->csv, "write every row to this CSV file")->check(output_file());
  cmd->callback([opts, &action] { action = [opts] { return run_efficiency(*opts); }; });
}

}  // namespace lacuna::cli
