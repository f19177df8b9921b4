// Activation and model-state memory; the derivation of every coefficient is in
// docs/memory-model.md (SAR §4.1, generalised per tensor).
#include "sim/cost/memory.h"

#include <string>

#include "sim/core/error.h"
#include "sim/core/int_math.h"

namespace lacuna::cost {
namespace {

void require(bool ok, const std::string& what) {
  if (!ok) throw Error("activation memory: " + what);
}

}  // namespace

Bytes layer_activation_bytes(const LayerActivationInputs& in) {
  require(in.seq_length > 0 && in.micro_batch > 0 && in.hidden > 0 && in.num_heads > 0 && in.ffn_hidden > 0,
          "sequence, microbatch, hidden, heads and FFN size must be positive");
  require(in.tp >= 1 && in.cp >= 1, "tp and cp must be at least 1");
  require(in.hidden % in.num_heads == 0, "hidden size " + std::to_string(in.hidden) +
                                             " is not a multiple of the head count " + std::to_string(in.num_heads));
  require(in.seq_length % in.cp == 0, "sequence length " + std::to_string(in.seq_length) +
                                          " is not a multiple of cp " + std::to_string(in.cp));
  require(in.activation == scenario::GELU || in.activation == scenario::SWIGLU, "activation must be GELU or SWIGLU");
  const int64_t kv_heads = in.num_kv_heads > 0 ? in.num_kv_heads : in.num_heads;  // 0: plain MHA
  require(kv_heads <= in.num_heads, "more key/value heads than attention heads");

  const int64_t t = in.tp;
  const int64_t s = in.seq_length / in.cp;  // this rank's share of the sequence
  const int64_t tokens = s * in.micro_batch;
  const int64_t h = in.hidden;
  const int64_t f = in.ffn_hidden;
  const int64_t head_dim = h / in.num_heads;
  const int64_t sp_divisor = in.sequence_parallel ? t : 1;

  if (in.recompute == scenario::RECOMPUTE_FULL) {
    return Bytes(ceil_div(2 * tokens * h, sp_divisor));  // the layer input only
  }

  // Bytes per token outside the TP region (replicated across TP ranks unless SP
  // splits the sequence): norm inputs, QKV input (norm output), attention
  // dropout mask, FC1 input (the shared norm output with parallel attn/MLP),
  // MLP dropout mask.
  int64_t replicated_per_token =
      in.parallel_attention_mlp ? (2 + 2 + 1 + 0 + 1) * h : (4 + 2 + 1 + 2 + 1) * h;
  // Bytes per token inside the TP region (split over t): Q, K and V, the
  // attention output (projection input), the activation function's input (two
  // FC1 outputs for SwiGLU) and FC2's input.
  const int64_t act_input = in.activation == scenario::SWIGLU ? 4 * f : 2 * f;
  int64_t split_per_token = 2 * h + 2 * 2 * kv_heads * head_dim + 2 * h + act_input + 2 * f;
  if (in.fp8_gemm_inputs) {
    // Transformer Engine saves each FP8 linear layer's quantized input
    // (module/linear.py, saved_inputmat): QKV's and FC1's inputs 1 B instead
    // of 2 B (with parallel attention/MLP the shared norm output becomes two
    // FP8 copies, 2 × 1 B: unchanged); FC2's input 1 B; the projection saves
    // an FP8 copy beside the bf16 attention output the attention backward
    // still reads (+1 B).
    if (!in.parallel_attention_mlp) replicated_per_token -= 2 * h;
    split_per_token += h - f;
  }
  // Softmax output (2), dropout mask (1) and dropout output (2) per score of the
  // a × s_q × s_kv attention matrix; FlashAttention and selective recompute do
  // not keep it.
  const bool keep_scores = in.recompute == scenario::RECOMPUTE_NONE && !in.flash_attention;
  const int64_t scores = keep_scores ? 5 * in.num_heads * s * in.seq_length * in.micro_batch : 0;

  const int64_t over_t = tokens * replicated_per_token * (t / sp_divisor) + tokens * split_per_token + scores;
  return Bytes(ceil_div(over_t, t));
}

ModelStateBytes model_state_bytes(int64_t parameters, int64_t dp, bool distributed_optimizer, int64_t grad_bytes) {
  if (parameters < 0) throw Error("model state: negative parameter count " + std::to_string(parameters));
  if (dp < 1) throw Error("model state: data-parallel size must be at least 1, got " + std::to_string(dp));
  ModelStateBytes out;
  out.weights = Bytes(2 * parameters);  // bf16/fp16 weights
  out.gradients = Bytes(grad_bytes * parameters);  // main-grad buffer (Megatron-LM: fp32 for bf16)
  const int64_t optimizer = 12 * parameters;  // fp32 master copy + Adam m + v
  out.optimizer = Bytes(distributed_optimizer ? ceil_div(optimizer, dp) : optimizer);
  return out;
}

}  // namespace lacuna::cost
