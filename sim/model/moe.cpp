// The MoE MLP's kernels and collectives; every formula is derived in
// docs/moe.md, Megatron-Core's behaviour cited there and beside each step.
#include "sim/model/moe.h"

#include <algorithm>
#include <cmath>

#include "sim/core/int_math.h"
#include "sim/model/mlp.h"
#include "sim/model/model_internal.h"

namespace lacuna::model {
namespace {

using ir::Phase;

using internal::d;

// The shared experts as a dense MLP of their total width, TP-split like the
// dense MLP (megatron/core/transformer/moe/shared_experts.py: SharedExpertMLP
// is an MLP with ffn_hidden_size = moe_shared_expert_intermediate_size).
LayerShape shared_shape(const LayerShape& s) {
  LayerShape sh = s;
  sh.ffn_hidden = s.moe.shared_ffn;
  sh.moe_layer = false;
  return sh;
}

constexpr MlpRoles kSharedRoles{ir::ROLE_SHARED_EXPERT_FC1, ir::ROLE_SHARED_EXPERT_ACT, ir::ROLE_SHARED_EXPERT_FC2};

int64_t fc1_width_expert(const LayerShape& s) {
  return (s.activation == scenario::SWIGLU ? 2 : 1) * s.moe.expert_ffn_per_rank();
}

CommPoint comm(CommGroup group, ir::CollectiveKind kind, int64_t bytes, Phase phase) {
  CommPoint c;
  c.group = group;
  c.kind = kind;
  c.bytes = bytes;
  c.phase = phase;
  return c;  // consumer: the next kernel (the dispatch is synchronous in Megatron-Core)
}

// The local experts' GEMMs over `rows` rows in total, balanced over the
// local experts (rows differ by at most one). `kind` 0: forward
// Y = X·W [rows, out]; 1: dgrad dX = dY·Wᵀ [rows, in]; 2: wgrad dW = Xᵀ·dY.
// Grouped (--moe-grouped-gemm, TEGroupedMLP / GroupedMLP): one kernel, shape
// [rows per expert (ceil), n, k, local experts] with the exact FLOPs and
// bytes (each expert's weight read once, every row once); sequential
// (SequentialMLP, Megatron-Core's default): one GEMM per local expert.
void expert_gemms(std::vector<Step>& st, const LayerShape& s, ir::KernelRole role, Phase phase, int kind,
                  int64_t rows, int64_t in, int64_t out) {
  const int64_t local = s.moe.local_experts();
  auto make = [&](int64_t r) {
    if (kind == 0) return gemm(role, phase, r, out, in);
    if (kind == 1) return gemm(role, ir::BACKWARD_INPUT, r, in, out);
    return gemm(role, ir::BACKWARD_WEIGHT, in, out, r);
  };
  if (s.moe.grouped_gemm || local == 1) {
    const int64_t per = ceil_div(rows, local);
    Kernel k = make(per);
    if (local > 1) k.shape.push_back(local);
    k.flops = 2.0 * d(rows) * d(in) * d(out);
    k.bytes = d(kBf16) * (d(rows) * d(in + out) + d(local) * d(in) * d(out));
    st.emplace_back(std::move(k));
  } else {
    for (int64_t e = 0; e < local; ++e) {
      const int64_t r = rows / local + (e < rows % local ? 1 : 0);
      if (r > 0) st.emplace_back(make(r));
    }
  }
  if (kind == 2 && !s.gradient_accumulation_fusion) {
    const int64_t g = s.grad_fp32 ? kFp32 : kBf16;
    st.emplace_back(stream_pass(ir::ROLE_GRAD_ACCUM, ir::BACKWARD_WEIGHT, local * in * out, kBf16 + 2 * g));
  }
}

// The experts' activation over `rows` rows of expert_ffn / expert_tp
// (bias + activation fused; SwiGLU reads gate and up).
Kernel expert_activation(const LayerShape& s, Phase phase, bool backward, int64_t rows) {
  const int64_t f = s.moe.expert_ffn_per_rank();
  const double elements = d(rows * f);
  if (s.activation == scenario::SWIGLU)
    return memory_bound(ir::SWIGLU, ir::ROLE_EXPERT_ACT, phase, {rows, f}, elements, backward ? 5 : 3);
  return memory_bound(ir::GELU, ir::ROLE_EXPERT_ACT, phase, {rows * f}, elements, backward ? 3 : 2);
}

// Router: logits = X·W_r [tokens, experts] (replicated weights, sequence-
// parallel tokens; megatron/core/transformer/moe/router.py), then top-k and
// softmax in fp32 (moe_utils.py topk_softmax_with_capacity: read the logits,
// write probabilities and the routing map).
void router_forward(std::vector<Step>& st, const LayerShape& s, Phase phase, const MoeTokens& t) {
  const int64_t e = s.moe.num_experts;
  st.emplace_back(gemm(ir::ROLE_ROUTER, phase, t.routed, e, s.hidden));
  st.emplace_back(memory_bound(ir::SOFTMAX, ir::ROLE_ROUTER, phase, {t.routed, e}, d(t.routed * e), 2, kFp32));
}

void router_backward(std::vector<Step>& st, const LayerShape& s, const MoeTokens& t) {
  const int64_t e = s.moe.num_experts;
  // Softmax backward: read probabilities and their gradient, write the
  // logits' gradient.
  st.emplace_back(
      memory_bound(ir::SOFTMAX, ir::ROLE_ROUTER, ir::BACKWARD_INPUT, {t.routed, e}, d(t.routed * e), 3, kFp32));
  st.emplace_back(gemm(ir::ROLE_ROUTER, ir::BACKWARD_INPUT, t.routed, s.hidden, e));
  linear_wgrad_rows(st, s, ir::ROLE_ROUTER, s.hidden, e, t.routed);
}

// Permutation (moe_utils.py permute): one row read and one written per token
// copy; unpermutation (unpermute): the copies read, weighted by their
// probabilities and summed into the routed tokens' rows.
Kernel permute_kernel(const LayerShape& s, Phase phase, int64_t rows) {
  return memory_bound(ir::ELEMENTWISE, ir::ROLE_MOE_PERMUTE, phase, {rows, s.hidden}, d(rows * s.hidden), 2);
}
Kernel unpermute_kernel(const LayerShape& s, Phase phase, int64_t rows, int64_t out_rows) {
  Kernel k = memory_bound(ir::ELEMENTWISE, ir::ROLE_MOE_UNPERMUTE, phase, {rows, s.hidden}, d(rows * s.hidden), 1);
  k.bytes += d(out_rows * s.hidden * kBf16);
  return k;
}

}  // namespace

MoeTokens moe_tokens(const LayerShape& s) {
  MoeTokens t;
  t.routed = s.sp_tokens();
  const int64_t assignments = t.routed * s.moe.top_k;
  t.sent = assignments;
  if (s.moe.capacity_factor > 0) {
    // moe_utils.py get_capacity: ceil(tokens · top_k / experts · factor), per
    // expert and source rank.
    t.capacity = static_cast<int64_t>(
        std::ceil(d(assignments) / d(s.moe.num_experts) * s.moe.capacity_factor - 1e-9));
    const int64_t cap_total = t.capacity * s.moe.num_experts;
    t.sent = s.moe.pad_to_capacity ? cap_total : std::min(assignments, cap_total);
  }
  t.expert = t.sent * s.moe.expert_tp;
  return t;
}

int64_t moe_domains(const LayerShape& s) { return s.moe.ep / std::max<int64_t>(s.moe.ep_per_domain, 1); }

int64_t moe_inter_domain_tokens(const LayerShape& s) {
  const MoeTokens t = moe_tokens(s);
  const int64_t domains = moe_domains(s);
  const int64_t e = s.moe.num_experts;
  const int64_t per_domain = e / domains;
  // P(a domain holds none of a token's k distinct experts) = C(E − E/D, k) /
  // C(E, k) = Π_{i<k} (E − E/D − i) / (E − i).
  double miss = 1;
  for (int64_t i = 0; i < s.moe.top_k; ++i) miss *= std::max(0.0, d(e - per_domain - i)) / d(e - i);
  const double kept = t.routed * s.moe.top_k > 0 ? d(t.sent) / d(t.routed * s.moe.top_k) : 0;
  return std::llround(d(t.routed) * d(domains) * (1 - miss) * std::min(kept, 1.0));
}

std::vector<CommPoint> moe_dispatch_comms(const LayerShape& s, Phase phase) {
  const MoeTokens t = moe_tokens(s);
  const int64_t row = s.hidden * kBf16;
  std::vector<CommPoint> out;
  switch (s.moe.dispatcher) {
    case scenario::DISPATCHER_ALLGATHER:
      // MoEAllGatherTokenDispatcher: every token gathered over the tp_ep
      // group (expert_tp × ep), here as the EP gather, then the expert-TP one.
      if (s.moe.ep > 1) out.push_back(comm(CommGroup::kEp, ir::ALL_GATHER, t.routed * s.moe.ep * row, phase));
      break;
    case scenario::DISPATCHER_HIERARCHICAL: {
      const int64_t domains = moe_domains(s);
      if (domains > 1)
        out.push_back(comm(CommGroup::kEpInterDomain, ir::ALL_TO_ALL, moe_inter_domain_tokens(s) * row, phase));
      if (s.moe.ep_per_domain > 1)
        out.push_back(comm(CommGroup::kEpIntraDomain, ir::ALL_TO_ALL, t.sent * row, phase));
      break;
    }
    default:
      // MoEAlltoAllTokenDispatcher: the permuted copies over EP (the send
      // buffer, own share included).
      if (s.moe.ep > 1) out.push_back(comm(CommGroup::kEp, ir::ALL_TO_ALL, t.sent * row, phase));
      break;
  }
  if (s.moe.expert_tp > 1) {
    // dispatch_postprocess: gather_from_sequence_parallel_region over the
    // expert-TP group (token_dispatcher.py).
    const int64_t gathered = s.moe.dispatcher == scenario::DISPATCHER_ALLGATHER
                                 ? t.routed * s.moe.ep * s.moe.expert_tp
                                 : t.expert;
    out.push_back(comm(CommGroup::kExpertTp, ir::ALL_GATHER, gathered * row, phase));
  }
  return out;
}

std::vector<CommPoint> moe_combine_comms(const LayerShape& s, Phase phase) {
  std::vector<CommPoint> out = moe_dispatch_comms(s, phase);
  std::reverse(out.begin(), out.end());
  // An all-gather's reverse is a reduce-scatter of the same nccl-tests size
  // (gathered output = unreduced input); an all-to-all's reverse is an
  // all-to-all of the same send buffer.
  for (CommPoint& c : out)
    if (c.kind == ir::ALL_GATHER) c.kind = ir::REDUCE_SCATTER;
  return out;
}

namespace {

// The forward permute, on which the host first waits for the token counts
// (docs/moe.md#host-synchronisation): Megatron-Core sizes the dispatch and the
// experts' GEMMs from per-expert counts it copies to the host. All-to-all
// (dropless): the copy at "before_permutation_1" and the sync at
// "before_ep_alltoall" (token_dispatcher.py MoEAlltoAllTokenDispatcher
// preprocess, _maybe_dtoh_and_synchronize); all-gather: `.cpu()` of the local
// counts after the gather (dispatch_postprocess); flex / HybridEP: the
// dispatched counts' `.sum()` and the experts' `tokens_per_expert.tolist()`
// (MoEFlexTokenDispatcher, experts.py). Padded to capacity, every size is
// known on the host and nothing waits (drop_and_pad). Backward reuses the
// forward's sizes.
Kernel forward_permute(const LayerShape& s, Phase phase, int64_t rows) {
  Kernel k = permute_kernel(s, phase, rows);
  k.host_sync = !s.moe.pad_to_capacity;
  return k;
}

}  // namespace

void moe_mlp_forward(std::vector<Step>& st, const LayerShape& s, Phase phase) {
  const MoeTokens t = moe_tokens(s);
  const int64_t h = s.hidden;
  // moe_layer.py forward: shared experts, router, permute (alltoall / flex:
  // before the dispatch; allgather: after it), dispatch, experts, combine,
  // unpermute (+ the shared output).
  if (s.moe.shared_ffn > 0) mlp_forward(st, shared_shape(s), phase, kSharedRoles);
  router_forward(st, s, phase, t);
  const bool permute_first = s.moe.dispatcher == scenario::DISPATCHER_ALLTOALL;
  if (permute_first && !s.moe.pad_to_capacity && (s.moe.ep > 1 || s.moe.expert_tp > 1)) {
    // MoEAlltoAllTokenDispatcher.preprocess: the per-expert token counts
    // (int64 [experts]) all-gathered over the tp_ep group, synchronously,
    // before the host reads the splits. Emitted on the EP group (Megatron's
    // group is expert_tp × ep ranks: the EP group when expert_tp = 1).
    st.emplace_back(comm(s.moe.ep > 1 ? CommGroup::kEp : CommGroup::kExpertTp, ir::ALL_GATHER,
                         s.moe.num_experts * 8 * (s.moe.ep > 1 ? s.moe.ep : s.moe.expert_tp), phase));
  }
  if (permute_first) st.emplace_back(forward_permute(s, phase, t.sent));
  for (const CommPoint& c : moe_dispatch_comms(s, phase)) st.emplace_back(c);
  if (!permute_first) st.emplace_back(forward_permute(s, phase, t.expert));
  expert_gemms(st, s, ir::ROLE_EXPERT_FC1, phase, 0, t.expert, h, fc1_width_expert(s));
  st.emplace_back(expert_activation(s, phase, false, t.expert));
  expert_gemms(st, s, ir::ROLE_EXPERT_FC2, phase, 0, t.expert, s.moe.expert_ffn_per_rank(), h);
  // All-gather and flex dispatchers unpermute locally before the combine
  // (which then returns the routed tokens' rows); all-to-all after it.
  if (!permute_first) st.emplace_back(unpermute_kernel(s, phase, t.expert, t.expert));
  for (const CommPoint& c : moe_combine_comms(s, phase)) st.emplace_back(c);
  if (permute_first) st.emplace_back(unpermute_kernel(s, phase, t.sent, t.routed));
}

void moe_mlp_backward(std::vector<Step>& st, const LayerShape& s) {
  constexpr Phase kB = ir::BACKWARD_INPUT;
  const MoeTokens t = moe_tokens(s);
  const int64_t h = s.hidden;
  const bool permute_first = s.moe.dispatcher == scenario::DISPATCHER_ALLTOALL;
  // Autograd order: unpermute's backward, the combine's backward (the
  // dispatch's collectives), the experts, the dispatch's backward (the
  // combine's), permute's backward, the router; the shared experts last
  // (created first in forward).
  if (permute_first) st.emplace_back(unpermute_kernel(s, kB, t.sent, t.routed));
  for (const CommPoint& c : moe_dispatch_comms(s, kB)) st.emplace_back(c);
  if (!permute_first) st.emplace_back(unpermute_kernel(s, kB, t.expert, t.expert));
  const int64_t f = s.moe.expert_ffn_per_rank();
  expert_gemms(st, s, ir::ROLE_EXPERT_FC2, kB, 1, t.expert, f, h);
  expert_gemms(st, s, ir::ROLE_EXPERT_FC2, kB, 2, t.expert, f, h);
  st.emplace_back(expert_activation(s, kB, true, t.expert));
  expert_gemms(st, s, ir::ROLE_EXPERT_FC1, kB, 1, t.expert, h, fc1_width_expert(s));
  expert_gemms(st, s, ir::ROLE_EXPERT_FC1, kB, 2, t.expert, h, fc1_width_expert(s));
  if (!permute_first) st.emplace_back(permute_kernel(s, kB, t.expert));
  for (const CommPoint& c : moe_combine_comms(s, kB)) st.emplace_back(c);
  if (permute_first) st.emplace_back(permute_kernel(s, kB, t.sent));
  router_backward(st, s, t);
  if (s.moe.shared_ffn > 0) mlp_backward(st, shared_shape(s), kSharedRoles, true, Consumer{});
}

int64_t dense_mlp_parameters(const LayerShape& s) {
  const int64_t b = s.linear_bias ? 1 : 0;
  return s.hidden * s.fc1_width() + b * s.fc1_width() + s.ffn_per_rank() * s.hidden + b * s.hidden;
}

int64_t moe_routed_expert_parameters(const LayerShape& s) {
  const int64_t b = s.linear_bias ? 1 : 0;
  const int64_t fc1 = fc1_width_expert(s);
  return s.moe.local_experts() * (s.hidden * fc1 + b * fc1 + s.moe.expert_ffn_per_rank() * s.hidden + b * s.hidden);
}

int64_t moe_mlp_parameters(const LayerShape& s) {
  const int64_t router = s.hidden * s.moe.num_experts;
  const int64_t shared = s.moe.shared_ffn > 0 ? dense_mlp_parameters(shared_shape(s)) : 0;
  return router + shared + moe_routed_expert_parameters(s);
}

int64_t dense_mlp_activation_bytes(const LayerShape& s) {
  const int64_t f = s.ffn_hidden;
  const int64_t act_input = s.activation == scenario::SWIGLU ? 4 * f : 2 * f;
  return s.tokens() * (act_input + 2 * f) / s.tp;
}

int64_t moe_mlp_activation_bytes(const LayerShape& s) {
  const MoeTokens t = moe_tokens(s);
  const int64_t f = s.moe.expert_ffn_per_rank();
  const int64_t act_input = (s.activation == scenario::SWIGLU ? 2 : 1) * f * kBf16;
  int64_t bytes = t.routed * s.moe.num_experts * kFp32  // router probabilities
                  + t.expert * (s.hidden * kBf16 + act_input + f * kBf16)  // FC1, act, FC2 inputs
                  + t.sent * s.hidden * kBf16;  // unpermute input
  if (s.moe.shared_ffn > 0) bytes += dense_mlp_activation_bytes(shared_shape(s));
  return bytes;
}

double moe_mlp_model_flops_forward(const LayerShape& s) {
  const double h = d(s.hidden);
  const double gated = s.activation == scenario::SWIGLU ? 2 : 1;
  const double expert = (gated + 1) * h * d(s.moe.expert_ffn);
  const double shared = (gated + 1) * h * d(s.moe.shared_ffn);
  return 2.0 * d(s.tokens()) * (d(s.moe.top_k) * expert + shared + h * d(s.moe.num_experts));
}

}  // namespace lacuna::model
