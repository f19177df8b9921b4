// Optimus, step 2: encoder plans (DP_enc, PP_enc, TP_enc) on the LLM's GPUs,
// how a GPU's LLM coordinates map to its encoder coordinates, the splits of
// the LLM's microbatches over encoder pipelines, and the paper's memory model
// (docs/placements.md, "Optimus").
#pragma once

#include <cstdint>
#include <vector>

namespace lacuna::placement::optimus {

// One encoder plan on an LLM plan (TP_llm, PP_llm, DP_llm), CP = 1 for both.
// TP_enc | TP_llm and PP_enc | PP_llm, so that every GPU holds exactly one
// encoder stage shard next to its LLM shard (colocation):
//   R = TP_llm / TP_enc TP slices per LLM stage,
//   m = (PP_llm / PP_enc) · R encoder pipelines per LLM pipeline,
//   DP_enc = m · DP_llm.
// A GPU with LLM coordinates (tp t, dp d, pp s) runs, within LLM pipeline d,
// encoder pipeline e = (s / PP_enc) · R + t / TP_enc, encoder stage
// j = s mod PP_enc, encoder TP rank t mod TP_enc. Encoder stage j + 1 sits on
// LLM stage s + 1 (the LLM's pp_next peer), and the pipeline's last stage on
// LLM stage (e / R) · PP_enc + PP_enc − 1.
struct Geometry {
  int32_t tp_llm = 1, pp_llm = 1, dp_llm = 1;
  int32_t tp_enc = 1, pp_enc = 1;

  int32_t slices() const { return tp_llm / tp_enc; }                      // R
  int32_t pipelines() const { return (pp_llm / pp_enc) * slices(); }      // m
  int32_t dp_enc() const { return pipelines() * dp_llm; }
  int32_t pipeline(int32_t s, int32_t t) const { return (s / pp_enc) * slices() + t / tp_enc; }
  int32_t encoder_stage(int32_t s) const { return s % pp_enc; }
  int32_t slice_of_pipeline(int32_t e) const { return e % slices(); }
  int32_t llm_stage(int32_t e, int32_t j) const { return (e / slices()) * pp_enc + j; }
  int32_t last_llm_stage(int32_t e) const { return llm_stage(e, pp_enc - 1); }
  // GPU classes of one LLM pipeline, indexed e · pp_enc + j.
  int32_t gpus() const { return pipelines() * pp_enc; }
  // The GPU class (LLM stage, slice) as a class index s · R + c.
  int32_t class_of(int32_t s, int32_t c) const { return s * slices() + c; }
  // Whether encoder pipeline e's last stage sends its output to LLM stage-0
  // TP slice k on the same GPU (PP_enc = 1 on stage 0, slice k = its own).
  bool boundary_self(int32_t e, int32_t k) const { return last_llm_stage(e) == 0 && slice_of_pipeline(e) == k; }
};

// Every (TP_enc, PP_enc) with TP_enc | TP_llm, PP_enc | PP_llm and
// PP_enc ≤ max_layers (no encoder stage without a layer), ordered by PP_enc,
// then TP_enc, ascending.
std::vector<Geometry> enumerate_geometries(int32_t tp_llm, int32_t pp_llm, int32_t dp_llm, int64_t max_layers);

// Layers [first, first + count) of an encoder with `layers` layers on encoder
// stage j of pp: an even split, the first layers % pp stages one more.
struct StageLayers {
  int64_t first = 0;
  int64_t count = 0;
};
StageLayers stage_layers(int64_t layers, int32_t pp, int32_t j);

// ---------------------------------------------------------------- splits

// Number of ways to give m encoder pipelines n LLM microbatches, each at
// least `min_part` (saturates at UINT64_MAX). The paper counts splits with
// every pipeline non-empty: n = 8, m = 2 gives 7.
uint64_t count_splits(int32_t n, int32_t m, int32_t min_part);

// The splits the planner tries: parts ≥ 1 when m ≤ n (≥ 0 when m > n, where
// some pipeline must stay idle). All of them, lexicographically, when there
// are at most `cap`; otherwise a deterministic subset of at most `cap`: the
// balanced split (n / m each, the n mod m remaining microbatches to the
// pipelines with the most LLM bubble time, ties to the lower index), then its
// neighbours (one microbatch moved from pipeline a to pipeline b, a ≠ b, in
// (a, b) order). `bubble_ns[e]` is pipeline e's bubble time.
std::vector<std::vector<int32_t>> enumerate_splits(int32_t n, int32_t m, int64_t cap,
                                                   const std::vector<int64_t>& bubble_ns);

// ---------------------------------------------------------------- memory

// The paper's model-state memory per GPU (the Optimus model planner) with k bytes per
// parameter kept on every replica (k = 6: bf16 weights + fp32 gradients, the
// optimizer state being sharded by the distributed optimizer):
//   MEM_model = k · (DP_enc · Φ_enc + DP_llm · Φ_llm) / n_gpu,
// and its overhead over unified 3D parallelism (the encoder in the LLM's
// layout, DP_enc = DP_llm):
//   k · (DP_enc − DP_llm) · Φ_enc / n_gpu.
inline constexpr double kReplicatedBytesPerParameter = 6;
double paper_model_memory_bytes(double k, int64_t dp_enc, double phi_enc, int64_t dp_llm, double phi_llm,
                                int64_t n_gpu);
double paper_memory_overhead_bytes(double k, int64_t dp_enc, int64_t dp_llm, double phi_enc, int64_t n_gpu);

}  // namespace lacuna::placement::optimus
