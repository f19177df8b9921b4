#include "sim/model/layer_shape.h"

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
  return s;
}

LayerShape unsharded(LayerShape shape, int64_t micro_batch) {
  shape.micro_batch = micro_batch;
  shape.tp = 1;
  shape.cp = 1;
  shape.sequence_parallel = false;
  return shape;
}

}  // namespace lacuna::model
