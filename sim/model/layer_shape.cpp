#include "sim/model/layer_shape.h"

#include <algorithm>

#include "sim/model/fp8.h"
#include "sim/scenario/execution.h"
#include "sim/scenario/moe.h"
#include "sim/scenario/nvlink_domain.h"

namespace lacuna::model {

LayerShape layer_shape(const scenario::Scenario& spec) {
  const auto& llm = spec.model().llm();
  const auto& par = spec.parallel();
  LayerShape s;
  s.micro_batch = spec.training().micro_batch();
  s.seq_length = llm.seq_length();
  s.hidden = llm.hidden_size();
  s.heads = llm.num_attention_heads();
  s.kv_heads = llm.num_kv_heads() > 0 ? llm.num_kv_heads() : llm.num_attention_heads();
  s.ffn_hidden = llm.ffn_hidden_size();
  s.vocab = llm.vocab_size();
  s.activation = llm.activation() == scenario::ACTIVATION_UNSPECIFIED ? scenario::GELU : llm.activation();
  s.norm = llm.norm() == scenario::NORM_UNSPECIFIED ? scenario::LAYERNORM : llm.norm();
  s.parallel_attention_mlp = llm.parallel_attention_mlp();
  s.causal = !llm.bidirectional_attention();
  s.linear_bias = llm.linear_bias();
  s.learned_positions = llm.position_embedding() == scenario::Transformer::POSITION_LEARNED;
  s.untied_output = llm.untie_embeddings_and_output_weights();
  s.unfused_attention = llm.attention_kernel() == scenario::Transformer::ATTENTION_UNFUSED;
  s.hidden_dropout = llm.hidden_dropout();
  s.attention_dropout = llm.attention_dropout();
  s.tp = par.tp() > 0 ? par.tp() : 1;
  s.cp = par.cp() > 0 ? par.cp() : 1;
  s.pp = par.pp() > 0 ? par.pp() : 1;
  s.sequence_parallel = par.sequence_parallel() && s.tp > 1;
  s.attention_window = llm.attention_window();
  apply_execution(s, spec);
  s.fp8 = fp8_plan(spec);  // FP8 programs (docs/fp8.md)
  if (scenario::has_moe(spec)) {
    const scenario::Moe m = scenario::resolve_moe(spec);
    s.moe.num_experts = m.num_experts();
    s.moe.top_k = m.top_k();
    s.moe.expert_ffn = m.expert_ffn_hidden_size();
    s.moe.shared_ffn = m.shared_expert_ffn_hidden_size();
    s.moe.layer_frequency = m.layer_frequency();
    s.moe.first_dense_layers = m.first_dense_layers();
    s.moe.capacity_factor = m.capacity_factor();
    s.moe.pad_to_capacity = m.pad_to_capacity();
    s.moe.dispatcher = m.dispatcher();
    s.moe.grouped_gemm = m.grouped_gemm();
    s.moe.ep = scenario::resolved_ep(spec);
    s.moe.expert_tp = scenario::resolved_expert_tp(spec);
    // An EP group's consecutive members are expert_tp ranks apart
    // (Megatron-Core's expert order tp-ep-dp, docs/moe.md#groups): a domain
    // of D GPUs holds D / expert_tp of them (at least 1, at most ep).
    const int64_t domain = scenario::nvlink_domain_gpus(spec.cluster());
    s.moe.ep_per_domain = std::clamp<int64_t>(domain / s.moe.expert_tp, 1, s.moe.ep);
    while (s.moe.ep % s.moe.ep_per_domain != 0) --s.moe.ep_per_domain;
  }
  return s;
}

LayerShape for_layer(LayerShape s, int64_t layer) {
  s.moe_layer = s.moe.is_moe_layer(layer);
  return s;
}

void apply_execution(LayerShape& s, const scenario::Scenario& spec) {
  const scenario::Execution x = scenario::resolve_execution(spec, scenario::SourceMap{});
  s.tp_async_grad_reduce = x.tp_async_grad_reduce();
  s.tp_overlap_ag_chunks = s.tp_overlap_rs_chunks = 1;
  if (x.tp_comm_overlap() && s.sequence_parallel && s.tp > 1) {
    // Transformer Engine v2.3's userbuffer defaults (module/base.py L237-288):
    // ring exchange in tp steps for the all-gather GEMMs, the pipeline method
    // in 4 splits for the reduce-scatter GEMMs.
    s.tp_overlap_ag_chunks = x.tp_comm_overlap_chunks() > 0 ? x.tp_comm_overlap_chunks() : s.tp;
    s.tp_overlap_rs_chunks = x.tp_comm_overlap_chunks() > 0 ? x.tp_comm_overlap_chunks() : 4;
  }
  s.gradient_accumulation_fusion = x.gradient_accumulation_fusion();
  s.grad_fp32 = x.grad_reduce_in_fp32();
  s.bias_gelu_fusion = x.bias_gelu_fusion();
  s.bias_dropout_fusion = x.bias_dropout_fusion();
  s.masked_softmax_fusion = x.masked_softmax_fusion();
  s.fused_layer_norm = x.fused_layer_norm();
}

LayerShape unsharded(LayerShape shape, int64_t micro_batch) {
  shape.micro_batch = micro_batch;
  shape.tp = 1;
  shape.cp = 1;
  shape.sequence_parallel = false;
  return shape;
}

}  // namespace lacuna::model
