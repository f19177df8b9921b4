// MoE load imbalance (docs/moe.md#load-imbalance): how many tokens each
// expert, and so each EP rank, computes in one (layer, microbatch,
// iteration). A pure function of the seed and those coordinates, drawn from
// the counter RNG, so every EP rank (and every fold representative) computes
// the same counts without talking to the others.
//
// ROUTING_DIRICHLET_MULTINOMIAL: expert popularities p ~ Dirichlet(alpha) over
// the E experts, then the N = tokens_per_microbatch · ep · top_k
// token-to-expert assignments of the EP group ~ Multinomial(N, p). A token's
// top_k choices are drawn as independent assignments (they may repeat an
// expert; the real router picks distinct ones): the per-expert totals keep
// their mean and differ from the distinct-choice draw only by the
// without-replacement correction (≤ top_k/E of the variance).
// ROUTING_BALANCED: every expert gets exactly N / E.
//
// Experts are dealt to EP ranks contiguously, E / ep each (Megatron-Core,
// megatron/core/transformer/moe/moe_layer.py: local_expert_indices_offset =
// ep_rank * num_local_experts). Capacity (capacity_factor > 0): Megatron caps
// each expert at ceil(T · top_k / E · capacity_factor) tokens per source rank
// (moe_utils.py get_capacity, called from topk_softmax_with_capacity); here
// the cap is applied to the expert's total over the EP group, ep times that,
// which drops no more than the per-source cap does (a lower bound on drops).
// pad_to_capacity: every expert computes its capacity whatever it received
// (token_dispatcher.py: num_tokens_per_local_expert = capacity · tp · ep), so
// the load is equal and nothing varies.
#pragma once

#include <cstdint>
#include <mutex>
#include <map>
#include <tuple>
#include <vector>

#include "sim/proto/program.pb.h"

namespace lacuna::variability {

// Gamma(shape, 1) from the counter RNG (Marsaglia & Tsang, "A simple method
// for generating gamma variables", ACM TOMS 26(3), 2000; shape < 1 by the
// boost Gamma(shape + 1) · U^(1/shape) from the same paper). `expert` and the
// other coordinates select the key; exposed for the distribution tests.
double gamma_draw(uint64_t seed, double shape, uint32_t layer, uint32_t expert, uint32_t microbatch,
                  uint32_t iteration);

// Binomial(n, p) from one key's two uniforms: exact inversion while
// n·p·(1 − p) < 30, else the normal approximation rounded and clamped to
// [0, n] (its error in the mean and variance is O(1) tokens against a
// standard deviation above 5.5).
int64_t binomial_draw(int64_t n, double p, double u, double z);

class MoeLoad {
 public:
  MoeLoad(const ir::MoeInfo& moe, uint64_t seed);

  // Whether expert loads differ at all (Dirichlet routing, no padding, more
  // than one EP rank or expert).
  bool varies() const { return varies_; }
  int32_t ep() const { return ep_; }
  // Tokens an EP rank's experts compute under perfect balance: T · top_k,
  // or the capacity of its experts when that is less (E · the per-source
  // capacity). The compiled expert kernels are costed on this count
  // (sim/model/moe.cpp moe_tokens).
  int64_t balanced_tokens_per_rank() const { return balanced_; }
  // Per-expert cap over the whole EP group (0: none).
  int64_t group_capacity_per_expert() const { return capacity_; }

  // Tokens each expert computes (after the capacity cap), E entries.
  std::vector<int64_t> expert_tokens(int32_t layer, int32_t microbatch, uint32_t iteration) const;
  // Per EP rank: its experts' tokens / balanced_tokens_per_rank(), ep entries.
  std::vector<double> rank_factors(int32_t layer, int32_t microbatch, uint32_t iteration) const;
  // rank_factors(...)[ep_index], cached per (layer, microbatch, iteration):
  // every expert kernel of that pass on every rank asks the same draw.
  double factor(int32_t ep_index, int32_t layer, int32_t microbatch, uint32_t iteration) const;
  // The cached rank_factors(...) (stable: entries are never erased).
  const std::vector<double>& factors(int32_t layer, int32_t microbatch, uint32_t iteration) const;

 private:
  uint64_t seed_ = 0;
  int32_t experts_ = 1;
  int32_t ep_ = 1;
  int32_t top_k_ = 1;
  double alpha_ = 1;
  bool dirichlet_ = false;
  bool varies_ = false;
  int64_t assignments_ = 0;  // T · top_k per source rank
  int64_t balanced_ = 0;
  int64_t capacity_ = 0;
  mutable std::mutex mu_;
  mutable std::map<std::tuple<int32_t, int32_t, uint32_t>, std::vector<double>> cache_;
};

}  // namespace lacuna::variability
