// A mixture-of-experts MLP as Megatron-Core runs it (docs/moe.md): shared
// experts, router, permutation, token dispatch over the expert-parallel group,
// the local experts' FFN, combine and unpermutation. Balanced routing: every
// expert receives its exact share; per-expert imbalance is the engine's
// (docs/moe.md#load-imbalance), keyed on the ROLE_EXPERT_* kernels.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/model/layer.h"

namespace lacuna::model {

// Token counts of one MoE layer on one rank for one microbatch.
struct MoeTokens {
  int64_t routed = 0;    // tokens this rank routes: its sequence-parallel share (validation requires SP with tp > 1)
  int64_t capacity = 0;  // per expert and source rank (capacity_factor > 0), else 0
  int64_t sent = 0;      // token copies it dispatches (routed · top_k, capped / padded to capacity)
  int64_t expert = 0;    // rows its local experts compute: sent · expert_tp (balanced)
};
MoeTokens moe_tokens(const LayerShape& s);

// Hierarchical dispatch: EP ranks per NVLink domain (L) and domains of the EP
// group (D = ep / L), and the tokens a rank sends in the inter-domain step:
// each token once per destination domain holding at least one of its top_k
// experts, routed · D · (1 − C(E − E/D, k) / C(E, k)) under uniform routing
// (× the capacity's kept fraction), rounded to the nearest token.
int64_t moe_domains(const LayerShape& s);
int64_t moe_inter_domain_tokens(const LayerShape& s);

// The dispatch collectives of one MoE layer's forward in issue order (the
// combine runs the reverse kinds in reverse order): group, kind and nccl-tests
// bytes (docs/moe.md#dispatchers).
std::vector<CommPoint> moe_dispatch_comms(const LayerShape& s, ir::Phase phase);
std::vector<CommPoint> moe_combine_comms(const LayerShape& s, ir::Phase phase);

// The MoE MLP's forward (between the pre-MLP norm and the residual add) and
// backward (autograd order, between the residual's backward and the norm's).
void moe_mlp_forward(std::vector<Step>& st, const LayerShape& s, ir::Phase phase);
void moe_mlp_backward(std::vector<Step>& st, const LayerShape& s);

// Parameters of one MoE layer's MLP on one rank: router (replicated), shared
// experts (TP-split), and the local experts (num_experts / ep, split over
// expert_tp); routed: the local experts' alone (reduced over expert DP).
int64_t moe_mlp_parameters(const LayerShape& s);
int64_t moe_routed_expert_parameters(const LayerShape& s);
// The dense MLP's parameters on one rank (what a MoE layer replaces).
int64_t dense_mlp_parameters(const LayerShape& s);

// Bytes the MoE MLP keeps per microbatch for backward on one rank beyond the
// pre-MLP norm output (docs/moe.md#memory): router probabilities (fp32), the
// expert FC1 input, the activation input, the FC2 input and the unpermute
// input, plus the shared experts' MLP tensors.
int64_t moe_mlp_activation_bytes(const LayerShape& s);
// The dense MLP's share of cost::layer_activation_bytes (FC1 output(s), FC2
// input), to swap it for the MoE one.
int64_t dense_mlp_activation_bytes(const LayerShape& s);

// Forward model FLOPs of the MoE MLP for s.tokens() tokens (activated
// parameters: top_k routed experts + shared experts + router).
double moe_mlp_model_flops_forward(const LayerShape& s);

}  // namespace lacuna::model
