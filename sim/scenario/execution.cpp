#include "sim/scenario/execution.h"

#include <algorithm>

#include "sim/scenario/checks.h"

namespace lacuna::scenario {
namespace {

// The defaults of one software release, read in NVIDIA/Megatron-LM at the
// tag or commit named (docs/megatron-semantics.md has every citation with
// file and line; docs/scenario.md#execution the table).
struct Software {
  const char* name;
  PipelineP2p p2p_interleaved;  // INTERLEAVED_1F1B
  PipelineP2p p2p_other;        // every other schedule
  bool scatter_gather;
  bool tp_async_grad_reduce;
  // Gradient-accumulation fusion, only with fp32 gradient accumulation (the
  // 2022 code turns it off otherwise).
  bool gradient_accumulation_fusion;
  bool gaf_needs_fp32_grads;
  bool fused_kernels;  // bias-GeLU, bias-dropout-add, masked softmax, LayerNorm
  bool tp_comm_overlap;
  bool timer_sync;
  bool nan_check;
  bool step_stats_sync;
  BatchBroadcast batch_broadcast;
};

const Software kSoftware[] = {
    // v2.5 (e269e200, 2021-08-10), the PTD-P paper's code: every p2p call is
    // one batch_isend_irecv, waited, then torch.cuda.synchronize()
    // (megatron/p2p_communication.py L126-130); scatter-gather in pipeline on
    // (arguments.py L585-587); the TP input-gradient all-reduce after the
    // linear's dgrad and wgrad (mpu/mappings.py); no gradient-accumulation
    // fusion (added 2022-02-22); bias-GeLU, bias-dropout-add, masked softmax
    // fused, MixedFusedLayerNorm; every timer start / stop synchronizes
    // (global_vars.py L192-203); broadcast_data with a size exchange read on
    // the host every microbatch (mpu/data.py).
    {"megatron-lm-v2.5", P2P_BLOCKING, P2P_BLOCKING, true, false, false, false, true, false, true, false, false,
     BROADCAST_TOKENS},
    // 9aad9203 (2022-05-20), the SAR paper's code: sequence parallelism and
    // selective recompute; the async TP all-reduce (default on since
    // 2021-09-02; an async reduce-scatter under SP, mpu/layers.py L245-313);
    // gradient-accumulation fusion kept only with fp32 accumulation
    // (arguments.py L176-188: bf16 yes, fp16 no); p2p, timers and data as
    // v2.5; scatter-gather skipped under SP (p2p_communication.py L63-72).
    {"megatron-lm-2022", P2P_BLOCKING, P2P_BLOCKING, true, true, true, true, true, false, true, false, false,
     BROADCAST_TOKENS},
    // core_v0.12.0 (d580efc6, 2025-05-06): overlap_p2p_comm is the training
    // default for the interleaved schedule only (training/arguments.py
    // L2067-2069, L467-476); the non-interleaved schedule keeps batched p2p
    // with torch.cuda.synchronize() (batch_p2p_sync has no flag,
    // model_parallel_config.py L262, p2p_communication.py L394-403);
    // scatter-gather gone (2023-03-23); async dgrad reduction always on;
    // timers at level 0 do not synchronize (L1403-1414); NaN checks on loss
    // and gradients on by default (L1541-1543); grad-norm and update
    // statistics reduced and read after the step (training.py L1271-1276);
    // the data loader's attention mask broadcast over TP (L2311-2313).
    {"megatron-core-0.12", P2P_OVERLAPPED, P2P_BLOCKING, false, true, true, false, true, false, false, true, true,
     BROADCAST_TENSORS_WITH_MASK},
    // MegaScale (NSDI'24; shared/reference/mllm-systems.md §3): Megatron-LM
    // with decoupled asynchronous p2p in every phase and TP/SP communication
    // fused into the GEMMs. Everything its paper does not describe is
    // Megatron-core's default.
    {"megascale", P2P_OVERLAPPED, P2P_OVERLAPPED, false, true, true, false, true, true, false, true, true,
     BROADCAST_TENSORS_WITH_MASK},
};

const Software* find_software(const std::string& name) {
  for (const Software& s : kSoftware)
    if (name == s.name) return &s;
  return nullptr;
}

std::string names() {
  std::string out;
  for (const Software& s : kSoftware) out += (out.empty() ? "\"" : ", \"") + std::string(s.name) + "\"";
  return out;
}

}  // namespace

std::vector<std::string> software_preset_names() {
  std::vector<std::string> out;
  for (const Software& s : kSoftware) out.emplace_back(s.name);
  return out;
}

Execution resolve_execution(const Scenario& spec, const SourceMap& locations) {
  const Execution& user = spec.execution();
  const std::string name = user.software().empty() ? kDefaultSoftware : user.software();
  const Software* sw = find_software(name);
  if (sw == nullptr)
    throw Error(locations.locate("execution.software"), "unknown software \"" + name + "\"",
                "use one of " + names() + " (docs/scenario.md#execution), or leave it empty for " +
                    std::string(kDefaultSoftware));
  Execution out = user;
  out.set_software(name);
  // Megatron-LM's one schedule with model chunks is the interleaved one, and
  // its p2p default follows the chunks (overlap_p2p_comm is forced off only
  // without virtual stages, training/arguments.py L467-476): a CUSTOM
  // schedule with chunks gets the interleaved default, so that a dumped
  // interleaved schedule runs as the built-in one.
  const bool chunked = spec.schedule().kind() == INTERLEAVED_1F1B ||
                       (spec.schedule().kind() == CUSTOM && spec.parallel().virtual_stages() > 1);
  if (out.pipeline_p2p() == P2P_UNSPECIFIED) out.set_pipeline_p2p(chunked ? sw->p2p_interleaved : sw->p2p_other);
  if (!out.has_pipeline_scatter_gather()) out.set_pipeline_scatter_gather(sw->scatter_gather);
  if (!out.has_tp_async_grad_reduce()) out.set_tp_async_grad_reduce(sw->tp_async_grad_reduce);
  if (!out.has_tp_comm_overlap()) out.set_tp_comm_overlap(sw->tp_comm_overlap);
  if (!out.has_tp_comm_overlap_chunks()) out.set_tp_comm_overlap_chunks(0);
  // bf16 (and fp32) training accumulates and reduces gradients in fp32
  // (Megatron forces it for bf16); fp16's default is fp16 gradients.
  const Precision precision = spec.training().precision();
  if (!out.has_grad_reduce_in_fp32()) out.set_grad_reduce_in_fp32(precision != FP16);
  if (!out.has_gradient_accumulation_fusion())
    out.set_gradient_accumulation_fusion(sw->gradient_accumulation_fusion &&
                                         (!sw->gaf_needs_fp32_grads || out.grad_reduce_in_fp32()));
  if (!out.has_bias_gelu_fusion()) out.set_bias_gelu_fusion(sw->fused_kernels);
  if (!out.has_bias_dropout_fusion()) out.set_bias_dropout_fusion(sw->fused_kernels);
  if (!out.has_masked_softmax_fusion()) out.set_masked_softmax_fusion(sw->fused_kernels);
  if (!out.has_fused_layer_norm()) out.set_fused_layer_norm(sw->fused_kernels);
  // --clip-grad defaults to 1.0 in every era (v2.5 arguments.py L347;
  // core_v0.12.0 training/arguments.py L1478).
  if (!out.has_clip_grad()) out.set_clip_grad(1.0);
  if (!out.has_timer_sync()) out.set_timer_sync(sw->timer_sync);
  if (!out.has_nan_check()) out.set_nan_check(sw->nan_check && precision != FP16);
  if (!out.has_step_stats_sync()) out.set_step_stats_sync(sw->step_stats_sync);
  if (out.batch_broadcast() == BATCH_BROADCAST_UNSPECIFIED) out.set_batch_broadcast(sw->batch_broadcast);
  return out;
}

void validate_execution(const Scenario& spec, const Checker& c) {
  const Execution& x = spec.execution();
  const ParallelPlan& p = spec.parallel();
  c.enumeration_or_unset("execution.pipeline_p2p", x.pipeline_p2p());
  c.enumeration_or_unset("execution.batch_broadcast", x.batch_broadcast());
  if (x.has_tp_comm_overlap_chunks() && x.tp_comm_overlap_chunks() != 0)
    c.count("execution.tp_comm_overlap_chunks", x.tp_comm_overlap_chunks(), 64,
            "0 (Transformer Engine's defaults: tp pieces for all-gathers, 4 for reduce-scatters) or a positive count");
  if (x.has_clip_grad()) c.real("execution.clip_grad", x.clip_grad(), 1e9, true);

  // Megatron-LM: "Tensor parallel communication/GEMM overlap can happen only
  // when sequence parallelism is enabled" (megatron/training/arguments.py).
  if (x.tp_comm_overlap() && !p.sequence_parallel())
    c.fail("execution.tp_comm_overlap",
           "TP communication overlap needs sequence parallelism (Megatron-LM rejects --tp-comm-overlap without "
           "--sequence-parallel)",
           "set parallel.sequence_parallel: true, or tp_comm_overlap: false");
  if (x.tp_comm_overlap() && p.tp() < 2)
    c.fail("execution.tp_comm_overlap", "TP communication overlap needs tp ≥ 2 (tp is " + std::to_string(p.tp()) + ")",
           "set tp_comm_overlap: false");
  if (x.tp_comm_overlap()) {
    // Every GEMM piece takes whole rows: the microbatch's tokens on this CP
    // rank must split into the pieces.
    const int64_t tokens = spec.training().micro_batch() * spec.model().llm().seq_length() / std::max<int64_t>(p.cp(), 1);
    const int64_t ag = x.tp_comm_overlap_chunks() > 0 ? x.tp_comm_overlap_chunks() : p.tp();
    const int64_t rs = x.tp_comm_overlap_chunks() > 0 ? x.tp_comm_overlap_chunks() : 4;
    for (int64_t pieces : {ag, rs})
      if (tokens % pieces != 0)
        c.fail(x.tp_comm_overlap_chunks() > 0 ? "execution.tp_comm_overlap_chunks" : "execution.tp_comm_overlap",
               "the " + std::to_string(tokens) + " tokens of a microbatch (micro_batch × seq_length / cp) do not split "
               "into " + std::to_string(pieces) + " GEMM pieces",
               "choose tp_comm_overlap_chunks dividing " + std::to_string(tokens));
  }
  // Megatron-LM asserts pp > 2 for the interleaved schedule with blocking p2p
  // ("to avoid having multiple p2p sends and recvs between same 2 ranks per
  // communication batch"; v2.5 megatron/arguments.py:119 asserted it for
  // every interleaved run, core releases only without p2p overlap).
  if (spec.schedule().kind() == INTERLEAVED_1F1B && x.pipeline_p2p() == P2P_BLOCKING && p.pp() <= 2)
    c.fail("schedule.kind",
           "Megatron-LM rejects the interleaved schedule with blocking pipeline p2p at pp ≤ 2 (pp is " +
               std::to_string(p.pp()) + ")",
           "use ONE_F_ONE_B with virtual_stages: 1, or execution.pipeline_p2p: P2P_OVERLAPPED");
  // Megatron-LM: --overlap-param-gather needs the distributed optimizer and
  // --overlap-grad-reduce.
  if (p.overlap_param_gather() && !p.distributed_optimizer())
    c.fail("parallel.overlap_param_gather",
           "overlapping the parameter all-gather needs the distributed optimizer (Megatron-LM rejects "
           "--overlap-param-gather without --use-distributed-optimizer)",
           "set distributed_optimizer: true, or overlap_param_gather: false");
  if (p.overlap_param_gather() && !p.overlap_grad_reduce())
    c.fail("parallel.overlap_param_gather",
           "Megatron-LM rejects --overlap-param-gather without --overlap-grad-reduce",
           "set overlap_grad_reduce: true as well, or overlap_param_gather: false");
  // Sliding-window attention.
  const Transformer& llm = spec.model().llm();
  if (llm.attention_window() < 0)
    c.fail("model.llm.attention_window", "must be ≥ 0, got " + std::to_string(llm.attention_window()),
           "the keys each query attends to, or 0 for full attention");
  if (llm.attention_window() > 0 && p.cp() > 1)
    c.fail("model.llm.attention_window",
           "sliding-window attention with context parallelism is not modelled (Megatron-LM's ring attention runs "
           "full causal attention)",
           "set cp: 1, or attention_window: 0");
  if (llm.attention_window() > 0 && llm.attention_kernel() == Transformer::ATTENTION_UNFUSED)
    c.fail("model.llm.attention_window",
           "the unfused core attention computes every score and only masks the window: a window saves no work there",
           "use attention_kernel: ATTENTION_FLASH with a window, or attention_window: 0");
  // The window's FLOPs (docs/kernels.md) are those of causal attention's band.
  if (llm.attention_window() > 0 && llm.bidirectional_attention())
    c.fail("model.llm.attention_window",
           "sliding-window attention is modelled for causal attention only, and this model is bidirectional",
           "set bidirectional_attention: false, or attention_window: 0");
  for (int i = 0; i < spec.model().encoders_size(); ++i)
    if (spec.model().encoders(i).transformer().attention_window() != 0)
      c.fail("model.encoders[" + std::to_string(i) + "].transformer.attention_window",
             "sliding-window attention is modelled for the LLM (causal) only",
             "remove attention_window from the encoder");
}

}  // namespace lacuna::scenario
