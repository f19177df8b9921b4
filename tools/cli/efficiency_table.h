// What `lacuna efficiency` computes: a preset's predicted kernel efficiency
// against shape (square GEMMs, a transformer layer's GEMMs, FlashAttention),
// and the comparison with published kernel throughputs. Every number is what
// the simulator itself would time: cost::RooflineModel on the preset's GPU,
// BF16, launch overhead included.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/cost/roofline.h"
#include "sim/proto/scenario.pb.h"

namespace lacuna::cli {

struct GemmRow {
  std::string label;  // "square", "qkv", "proj", "fc1", "fc2"
  int64_t m, n, k;
  int64_t hidden = 0, tp = 0;  // layer GEMMs only
  cost::GemmShapeFactor shape;
  double efficiency;  // achieved / peak, launch overhead included
  double tflops;
};

struct AttentionRow {
  int64_t seq, head_dim;
  bool causal;
  cost::AttentionShapeFactor shape;
  double efficiency;  // forward kernel; the backward has the same factor
  double tflops;
};

struct ComparisonRow {
  std::string kind;     // "GEMM" or "ATTENTION"
  std::string what;     // shape, e.g. "8192×8192×8192" or "FA2 fwd+bwd s=2048 d=128 causal"
  double predicted = 0;  // TFLOP/s
  double published = 0;  // TFLOP/s
  double error = 0;      // (predicted − published) / published
  std::string source;
  bool derives = false;  // a preset parameter was derived from this figure
  // The shape, for plotting: GEMM m, n, k; attention seq, head dim, causal, pass.
  int64_t m = 0, n = 0, k = 0;
  int64_t seq = 0, head_dim = 0;
  bool causal = false;
  std::string pass;
};

struct ErrorSummary {
  int count = 0;
  double mean_abs = 0;
  double max_abs = 0;
};

class EfficiencyTable {
 public:
  // Throws lacuna::Error for an unknown preset name.
  explicit EfficiencyTable(const std::string& preset);

  const std::string& preset() const { return preset_; }
  const scenario::GpuSpec& gpu() const { return gpu_; }

  // M = N = K from 512 to 16384 (every 256 up to 4096, then every 1024).
  std::vector<GemmRow> square_gemms() const;
  // The four GEMMs of a GPT layer's forward (QKV, attention projection, FC1,
  // FC2) for M = tokens, hidden h and tensor parallelism tp.
  std::vector<GemmRow> layer_gemms(const std::vector<int64_t>& tokens, const std::vector<int64_t>& hidden,
                                   const std::vector<int64_t>& tp) const;
  // FlashAttention's benchmark: 16k tokens, hidden 2048, seq 512…16k.
  std::vector<AttentionRow> attention() const;
  // Predicted against every published figure for this preset's GPU.
  std::vector<ComparisonRow> comparison() const;

  GemmRow gemm(const std::string& label, int64_t m, int64_t n, int64_t k) const;
  AttentionRow attention_row(int64_t seq, int64_t head_dim, bool causal) const;

 private:
  // Seconds lacuna takes for a kernel of `flops` and `shape`.
  double seconds(int op_class, const std::vector<int64_t>& shape, double flops) const;

  std::string preset_;
  scenario::GpuSpec gpu_;
  cost::RooflineModel roofline_;
  double peak_;
};

ErrorSummary summarize(const std::vector<ComparisonRow>& rows, const std::string& kind, bool include_derived);

}  // namespace lacuna::cli
