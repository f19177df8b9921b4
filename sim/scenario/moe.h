// Mixture-of-experts fields of a scenario (docs/moe.md): their resolution to
// Megatron-Core's defaults and their validation.
#pragma once

#include <cstdint>

#include "sim/scenario/checks.h"

namespace lacuna::scenario {

// Whether the LLM has MoE layers (model.llm.moe.num_experts > 0).
bool has_moe(const Scenario& spec);

// model.llm.moe with every unset field resolved (docs/moe.md#defaults):
// expert_ffn_hidden_size 0 -> transformer.ffn_hidden_size (Megatron-LM
// training/arguments.py: moe_ffn_hidden_size = ffn_hidden_size when unset);
// layer_frequency 0 -> 1 (--moe-layer-freq default 1); dispatcher
// UNSPECIFIED -> DISPATCHER_ALLGATHER and grouped_gemm unset -> false, the
// defaults of every software preset (megatron/core/transformer/
// transformer_config.py: moe_token_dispatcher_type = "allgather",
// moe_grouped_gemm = False; the pre-core presets had no MoE at all).
Moe resolve_moe(const Scenario& spec);

// parallel.ep (0 -> 1) and parallel.expert_tp (0 -> parallel.tp, Megatron-LM
// arguments.py: expert_tensor_parallel_size = tensor_model_parallel_size when
// unset).
int64_t resolved_ep(const Scenario& spec);
int64_t resolved_expert_tp(const Scenario& spec);

// Megatron-Core's expert data-parallel size within one pipeline stage:
// tp·cp·dp / (expert_tp·ep) (parallel_state.py: expert_data_parallel_size =
// world / (expert_tp · ep · pp)).
int64_t expert_dp(const Scenario& spec);

// The MoE rules (each error names the field): ep divides num_experts, 1 <=
// top_k <= num_experts, ep·expert_tp divides tp·cp·dp, expert_tp divides the
// expert FFN, capacity / padding consistent, dispatcher known, the Dirichlet
// concentration positive when used, no MoE field without num_experts.
void validate_moe(const Scenario& spec, const Checker& c);

}  // namespace lacuna::scenario
