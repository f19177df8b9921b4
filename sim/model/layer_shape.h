// The shape of one transformer layer as one rank sees it: the model's sizes
// plus the TP / CP / SP split. Every kernel formula in sim/model derives from
// these few numbers (docs/kernels.md).
#pragma once

#include <cstdint>

#include "sim/model/fp8_plan.h"
#include "sim/proto/scenario.pb.h"

namespace lacuna::model {

// A mixture-of-experts MLP as one rank sees it (docs/moe.md). Resolved
// (sim/scenario/moe.h): num_experts 0 means every layer is dense.
struct MoeShape {
  int64_t num_experts = 0;
  int64_t top_k = 1;
  int64_t expert_ffn = 0;       // one routed expert's FFN width (unsplit)
  int64_t shared_ffn = 0;       // shared experts' total FFN width (0: none)
  int64_t layer_frequency = 1;  // every N-th layer (after first_dense_layers) is MoE
  int64_t first_dense_layers = 0;
  double capacity_factor = 0;   // 0: dropless
  bool pad_to_capacity = false;
  scenario::MoeDispatcher dispatcher = scenario::DISPATCHER_ALLGATHER;
  bool grouped_gemm = false;
  int64_t ep = 1;
  int64_t expert_tp = 1;
  // EP ranks of one EP group inside one NVLink domain (hierarchical
  // dispatch): min(ep, NVLink domain GPUs / the stride of the EP group).
  int64_t ep_per_domain = 1;

  bool enabled() const { return num_experts > 0; }
  int64_t local_experts() const { return num_experts / ep; }
  int64_t expert_ffn_per_rank() const { return expert_ffn / expert_tp; }
  // Megatron-Core's --moe-layer-freq N with DeepSeek-V3's first dense layers:
  // layer l (0-based, of the whole LLM) is MoE when l ≥ first_dense_layers
  // and (l − first_dense_layers) % N == 0 (Megatron's pattern
  // [1 if i % N == 0 else 0], megatron/core/models/gpt/gpt_layer_specs.py).
  bool is_moe_layer(int64_t layer) const {
    return enabled() && layer >= first_dense_layers && (layer - first_dense_layers) % layer_frequency == 0;
  }
};

struct LayerShape {
  int64_t micro_batch = 1;
  int64_t seq_length = 1;  // full sequence, before the CP split
  int64_t hidden = 1;
  int64_t heads = 1;
  int64_t kv_heads = 1;
  int64_t ffn_hidden = 1;
  int64_t vocab = 1;
  scenario::Activation activation = scenario::GELU;
  scenario::Norm norm = scenario::LAYERNORM;
  bool parallel_attention_mlp = false;
  bool causal = true;
  bool linear_bias = false;
  // Learned absolute position embeddings (POSITION_LEARNED: a seq × hidden
  // table on the embedding stage) rather than rotary or none.
  bool learned_positions = false;
  // Output layer with its own vocab × hidden weights (Megatron-LM's
  // --untie-embeddings-and-output-weights) instead of reusing the embedding.
  bool untied_output = false;
  // Megatron-LM's unfused CoreAttention (QKᵀ GEMM, softmax, dropout, P·V
  // GEMM over materialised s×s scores) instead of one FlashAttention kernel.
  bool unfused_attention = false;
  // Dropout probabilities: > 0 adds the dropout work (docs/kernels.md).
  double hidden_dropout = 0;
  double attention_dropout = 0;
  int64_t tp = 1;
  int64_t cp = 1;
  int64_t pp = 1;  // pipeline stages: where a tied output layer keeps its copy
  bool sequence_parallel = false;
  // Sliding-window attention: keys per query (0: full attention).
  int64_t attention_window = 0;
  // Execution switches (scenario.proto Execution, docs/scenario.md#execution);
  // the defaults are Megatron-core's. TP communication overlap
  // (tp_comm_overlap): the GEMMs after an all-gather split into
  // tp_overlap_ag_chunks pieces, those before a reduce-scatter into
  // tp_overlap_rs_chunks, each pipelined with its piece of the collective
  // (1: no overlap).
  bool tp_async_grad_reduce = true;
  int64_t tp_overlap_ag_chunks = 1;
  int64_t tp_overlap_rs_chunks = 1;
  bool gradient_accumulation_fusion = true;
  bool grad_fp32 = true;  // main_grad in fp32 (else the training precision's 2 bytes)
  bool bias_gelu_fusion = true;
  bool bias_dropout_fusion = true;
  bool masked_softmax_fusion = true;
  bool fused_layer_norm = true;
  // Mixture of experts (docs/moe.md): the model's MoE settings, and whether
  // this shape's MLP is the MoE one (set per layer by the caller: layer_forward
  // and layer_backward build a MoE MLP when moe_layer is true).
  MoeShape moe;
  bool moe_layer = false;
  // FP8 (training.precision FP8): which GEMMs run FP8, resolved (fp8.h).
  Fp8Plan fp8;

  int64_t head_dim() const { return hidden / heads; }
  int64_t seq_per_rank() const { return seq_length / cp; }
  // Tokens a GEMM of this rank sees: the whole (CP-local) sequence.
  int64_t tokens() const { return micro_batch * seq_per_rank(); }
  // Tokens of the norms / residual / dropout region: sequence-sharded over TP
  // with SP, replicated without.
  int64_t sp_tokens() const { return sequence_parallel ? tokens() / tp : tokens(); }
  int64_t heads_per_rank() const { return heads / tp; }
  // Megatron replicates KV heads when tp > kv_heads (GQA with few groups).
  int64_t kv_heads_per_rank() const { return kv_heads >= tp ? kv_heads / tp : 1; }
  int64_t q_width() const { return heads_per_rank() * head_dim(); }
  int64_t kv_width() const { return kv_heads_per_rank() * head_dim(); }
  int64_t qkv_width() const { return q_width() + 2 * kv_width(); }
  int64_t ffn_per_rank() const { return ffn_hidden / tp; }
  // FC1 output width: SwiGLU has gate and up projections.
  int64_t fc1_width() const { return (activation == scenario::SWIGLU ? 2 : 1) * ffn_per_rank(); }
  // Megatron pads the vocabulary to a multiple of the TP size; ceil is that
  // padding without the extra 128-alignment.
  int64_t vocab_per_rank() const { return (vocab + tp - 1) / tp; }
  // Whether the last stage holds output-layer weights of its own: untied, or
  // tied with pp > 1 (Megatron keeps a copy of the word embedding on the last
  // stage and all-reduces its gradient with the first). Tied with pp = 1 the
  // one embedding table is the output layer.
  bool head_has_output_weights() const { return untied_output || pp > 1; }
  // One hidden-state tensor of this rank's (CP-local, full) sequence, bf16:
  // the nccl-tests size of every TP collective and the unsharded p2p message.
  int64_t hidden_bytes() const { return tokens() * hidden * 2; }
};

// The LLM of a scenario with its parallel plan and micro-batch. The scenario
// must be validated (sizes positive and divisible).
LayerShape layer_shape(const scenario::Scenario& spec);

// Sets the execution switches of `s` from the scenario's (resolved) Execution;
// TP overlap applies only where s has TP with SP.
void apply_execution(LayerShape& s, const scenario::Scenario& spec);

// The same model with no parallelism and `micro_batch` sequences: what model
// FLOPs and parameter totals are computed on.
LayerShape unsharded(LayerShape shape, int64_t micro_batch);

// `s` as layer `layer` of the LLM: moe_layer set when that layer is MoE.
LayerShape for_layer(LayerShape s, int64_t layer);

}  // namespace lacuna::model
