// Per-shape kernel efficiency (docs/cost-model.md#per-shape-efficiency): the
// factor in (0, 1] by which a kernel's class efficiency (GpuSpec.efficiency
// [class].flops, the efficiency of that class at its best shape) is multiplied
// for the kernel's own shape.
//
//  GEMM       tile quantization × wave quantization over the SMs × the main
//             loop's ramp K / (K + k_overhead), for the best of the library's
//             tiles (and split-K factors when the tiles fill less than a wave).
//  ATTENTION  FlashAttention's CTAs, one per (batch, head, block of block_q
//             queries), scheduled longest first over the SMs, each costing its
//             visited keys plus kv_overhead; times the head-dimension ramp
//             d / (d + head_dim_overhead).
//  others     1: memory-bound kernels have no shape term; their floor is
//             GpuSpec.kernel_overhead_us, which the roofline adds to every
//             kernel.
//
// Pure and deterministic; safe for concurrent const calls (the attention
// schedules are memoised under a mutex).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "sim/proto/program.pb.h"
#include "sim/proto/scenario.pb.h"

namespace lacuna::cost {

// How one GEMM shape was tiled: the factor and what made it.
struct GemmShapeFactor {
  double factor = 1;      // tile_fill × wave_fill × k_ramp of the best choice
  int tile = -1;          // index into KernelShapeModel.gemm_tiles; -1: no tiles (flat)
  int64_t split_k = 1;
  int64_t ctas = 0;       // CTAs launched (tiles × batch × split_k)
  int64_t slots = 0;      // CTAs resident at once: SMs × CTAs per SM
  double tile_fill = 1;   // useful / computed output elements (partial edge tiles)
  double wave_fill = 1;   // CTAs / (waves × slots)
  double k_ramp = 1;      // (K / split) / (K / split + gemm_k_overhead)
};

// The FlashAttention schedule of one attention shape.
struct AttentionShapeFactor {
  double factor = 1;         // block_fill × head_dim_ramp
  int64_t ctas = 0;          // batch × heads × query blocks
  double block_fill = 1;     // useful key·row work / (SMs × makespan), makespan in key units
  double head_dim_ramp = 1;  // d / (d + attention_head_dim_overhead)
};

class KernelEfficiency {
 public:
  // `model` as resolved from the preset and the scenario; `num_sms` the GPU's
  // SMs (needed only when the model has GEMM tiles or an attention block).
  // Throws lacuna::Error naming the field for a value out of range.
  KernelEfficiency(const scenario::KernelShapeModel& model, int64_t num_sms);

  // The factor for `op`: GEMM and ATTENTION by shape; 1 for every other
  // class, for `flat: true`, for a class the model leaves unset (no tiles, no
  // attention block), and for a shape too short to read (hand-made ops).
  double factor(const ir::Compute& op) const;

  // GEMM C[m,n] = A[m,k]·B[k,n], `batch` independent products in one kernel.
  GemmShapeFactor gemm(int64_t m, int64_t n, int64_t k, int64_t batch = 1) const;
  // `window` 0: full attention; else each query sees at most `window` keys
  // (causal: the most recent ones, itself included).
  AttentionShapeFactor attention(int64_t batch, int64_t heads, int64_t seq_q, int64_t seq_kv, int64_t head_dim,
                                 bool causal, int64_t window = 0) const;

  bool flat() const { return flat_; }
  bool gemm_by_shape() const { return !flat_ && !tiles_.empty(); }
  bool attention_by_shape() const { return !flat_ && block_q_ > 0; }

 private:
  struct Tile {
    int64_t m, n, ctas_per_sm;
  };
  bool flat_ = false;
  int64_t sms_ = 0;
  std::vector<Tile> tiles_;
  double k_overhead_ = 0;
  int64_t max_split_k_ = 1;
  int64_t block_q_ = 0;
  double kv_overhead_ = 0;
  double head_dim_overhead_ = 0;

  // Longest-first schedules are the costly part and shapes repeat across
  // ranks: memoised, shared by copies (it is only a cache).
  struct Memo {
    std::mutex mu;
    std::map<std::vector<int64_t>, AttentionShapeFactor> attention;
  };
  std::shared_ptr<Memo> memo_ = std::make_shared<Memo>();
};

}  // namespace lacuna::cost
