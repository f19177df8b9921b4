// Rules that tie model, cluster, plan, schedule and batch together. Every
// section has been range-checked first, so products below cannot overflow
// unless stated (the GPU product uses 128-bit arithmetic).
#include <tuple>

#include "sim/scenario/checks.h"
#include "sim/scenario/scenario_internal.h"

namespace lacuna::scenario {

namespace {

using internal::s;

std::string divisors_hint(int64_t n) {
  std::string out;
  int shown = 0;
  for (int64_t d = 1; d <= n && shown < 6; ++d)
    if (n % d == 0) out += (shown++ ? ", " : "") + s(d);
  return out;
}

void check_tensor_and_context(const Scenario& spec, const Checker& c) {
  const auto& m = spec.model().llm();
  const auto& p = spec.parallel();
  const int64_t tp = p.tp();
  if (m.num_attention_heads() % tp != 0)
    c.fail("parallel.tp", "tp=" + s(tp) + " must divide attention heads (" + s(m.num_attention_heads()) + ")",
           "choose tp among the divisors of " + s(m.num_attention_heads()) + " (" +
               divisors_hint(m.num_attention_heads()) + ", ...)");
  if (m.num_kv_heads() % tp != 0)
    c.fail("parallel.tp", "tp=" + s(tp) + " must divide kv heads (" + s(m.num_kv_heads()) + ")",
           "choose tp among the divisors of " + s(m.num_kv_heads()) + " (" + divisors_hint(m.num_kv_heads()) +
               ", ...)");
  if (m.ffn_hidden_size() % tp != 0)
    c.fail("parallel.tp", "tp=" + s(tp) + " must divide ffn_hidden_size (" + s(m.ffn_hidden_size()) + ")",
           "choose tp dividing " + s(m.ffn_hidden_size()));
  if (p.sequence_parallel() && tp == 1)
    c.fail("parallel.sequence_parallel", "sequence_parallel needs tp > 1",
           "set sequence_parallel: false, or tp ≥ 2");
  const int64_t cp = p.cp();
  if (cp > 1 && m.seq_length() % (2 * cp) != 0)
    c.fail("parallel.cp",
           "seq_length " + s(m.seq_length()) + " must be divisible by 2 × cp = " + s(2 * cp) +
               " (load-balanced causal context parallelism gives each CP rank two chunks)",
           "choose cp so that 2·cp divides " + s(m.seq_length()));
  if (p.sequence_parallel() && (m.seq_length() / cp) % tp != 0)
    c.fail("parallel.sequence_parallel",
           "sequence parallelism splits the " + s(m.seq_length() / cp) + " tokens per CP rank over tp=" + s(tp) +
               ", which does not divide them",
           "choose seq_length, cp and tp so that seq_length / cp is a multiple of tp");
}

void check_world_and_batch(const Scenario& spec, const Checker& c) {
  const auto& p = spec.parallel();
  const __int128 product = static_cast<__int128>(p.tp()) * p.cp() * p.pp() * p.dp();
  // An encoder island (non-colocated encoder) takes the cluster's last GPUs;
  // the LLM fills the rest (validate_mllm.cpp checks the island itself).
  const int64_t island = encoder_island_gpus(spec);
  const int64_t gpus = num_gpus(spec) - island;
  if (product != gpus) {
    const std::string shown = product > Limits::kGpus * int64_t{1000} ? "more than 10^9" : s(static_cast<int64_t>(product));
    const int64_t other = p.tp() * p.cp() * p.pp();  // each ≤ 10^6 only if product is small; guard below
    std::string fix = "make tp·cp·pp·dp equal " + s(gpus) + ", or change cluster.num_nodes";
    if (product <= Limits::kGpus * int64_t{1000} && gpus % other == 0)
      fix = "set dp: " + s(gpus / other) + " (= " + s(gpus) + " / (tp·cp·pp)), or change cluster.num_nodes";
    c.fail("parallel.dp",
           "tp×cp×pp×dp = " + shown + " but the cluster has " + s(gpus) + " GPUs" +
               (island > 0 ? " for the LLM (" + s(island) + " more are the encoder island)" : ""),
           fix);
  }
  const auto& t = spec.training();
  const int64_t per_step = t.micro_batch() * p.dp();
  if (t.global_batch() % per_step != 0) {
    const int64_t lo = t.global_batch() / per_step * per_step;
    std::string fix = "use a multiple of " + s(per_step) + " (e.g. " + (lo > 0 ? s(lo) + " or " : "") +
                      s(lo + per_step) + ")";
    c.fail("training.global_batch",
           "global_batch " + s(t.global_batch()) + " is not a multiple of micro_batch × dp (" + s(t.micro_batch()) +
               " × " + s(p.dp()) + ")",
           fix);
  }
}

// Megatron-LM's uneven pipeline (core transformer_config.py L770-880):
// first / last stage layers > 0, divisible by the model chunks; the rest
// split evenly over the other stages, again divisible by the chunks.
void check_uneven_stages(const Scenario& spec, const Checker& c) {
  const auto& p = spec.parallel();
  const int64_t layers = spec.model().llm().num_layers(), pp = p.pp(), v = p.virtual_stages();
  const bool first = p.has_first_stage_layers(), last = p.has_last_stage_layers();
  const std::string field = first ? "parallel.first_stage_layers" : "parallel.last_stage_layers";
  if (!p.layers_per_stage().empty())
    c.fail(field, "first_stage_layers / last_stage_layers and layers_per_stage both set",
           "use one of them: layers_per_stage lists every virtual stage");
  if (pp < 2) c.fail(field, "needs pipeline parallelism (pp is " + s(pp) + ")", "remove it, or set pp ≥ 2");
  int64_t given = 0;
  for (const auto& [set, value, name] : {std::tuple{first, p.first_stage_layers(), "parallel.first_stage_layers"},
                                         std::tuple{last, p.last_stage_layers(), "parallel.last_stage_layers"}}) {
    if (!set) continue;
    if (value < 1 || value > layers)
      c.fail(name, "must be between 1 and num_layers (" + s(layers) + "), got " + s(value),
             "give the layers of that pipeline stage");
    if (value % v != 0)
      c.fail(name, s(value) + " layers do not split over the stage's " + s(v) + " model chunks",
             "use a multiple of virtual_stages (" + s(v) + ")");
    given += value;
  }
  const int64_t others = pp - (first ? 1 : 0) - (last ? 1 : 0);
  const int64_t rest = layers - given;
  if (rest < 0 || (others == 0 && rest != 0) || (others > 0 && (rest % others != 0 || (rest / others) % v != 0)))
    c.fail(field,
           "the other " + s(others) + " stages would get " + s(rest) + " layers, which do not split evenly into " +
               s(others) + " × " + s(v) + " model chunks",
           "choose first / last stage layers so that num_layers − them is a multiple of " + s(others * v));
}

void check_layers(const Scenario& spec, const Checker& c) {
  const auto& p = spec.parallel();
  const int64_t layers = spec.model().llm().num_layers();
  const int64_t stages = p.pp() * p.virtual_stages();
  if (p.has_first_stage_layers() || p.has_last_stage_layers()) {
    check_uneven_stages(spec, c);
    return;
  }
  if (p.layers_per_stage().empty()) {
    if (layers % stages != 0)
      c.fail(p.virtual_stages() > 1 ? "parallel.virtual_stages" : "parallel.pp",
             "num_layers " + s(layers) + " is not divisible by pp × virtual_stages (" + s(p.pp()) + " × " +
                 s(p.virtual_stages()) + " = " + s(stages) + ")",
             "choose pp and virtual_stages whose product divides " + s(layers) +
                 ", or list the layers of each virtual stage in parallel.layers_per_stage");
    return;
  }
  if (p.layers_per_stage_size() != stages)
    c.fail("parallel.layers_per_stage",
           "has " + s(p.layers_per_stage_size()) + " entries but pp × virtual_stages = " + s(stages),
           "give exactly one layer count per virtual stage, in pipeline order");
  int64_t sum = 0;
  for (int i = 0; i < p.layers_per_stage_size(); ++i) {
    const int64_t n = p.layers_per_stage(i);
    if (n < 1 || n > layers)
      c.fail("parallel.layers_per_stage[" + s(i) + "]", "must be between 1 and num_layers (" + s(layers) + "), got " + s(n),
             "every virtual stage needs at least one layer");
    sum += n;
  }
  if (sum != layers)
    c.fail("parallel.layers_per_stage", "sums to " + s(sum) + " but num_layers is " + s(layers),
           "make the entries add up to " + s(layers));
}

// Megatron-LM's recompute rules (core transformer_config.py L684-765):
// recompute_num_layers only with full recompute, and at most a chunk's layers.
void check_recompute(const Scenario& spec, const Checker& c) {
  const auto& p = spec.parallel();
  if (p.recompute_num_layers() == 0) return;
  if (p.recompute_num_layers() < 0)
    c.fail("parallel.recompute_num_layers", "must be ≥ 0, got " + s(p.recompute_num_layers()),
           "the layers of each model chunk to recompute, or 0 for all");
  if (p.recompute() != RECOMPUTE_FULL)
    c.fail("parallel.recompute_num_layers",
           "recompute_num_layers needs recompute: RECOMPUTE_FULL (Megatron-LM rejects --recompute-num-layers with "
           "selective recompute)",
           "set recompute: RECOMPUTE_FULL, or remove recompute_num_layers");
}

void check_schedule(const Scenario& spec, const Checker& c) {
  const auto& p = spec.parallel();
  const auto kind = spec.schedule().kind();
  const std::string name = ScheduleKind_Name(kind);
  const int64_t v = p.virtual_stages();
  const bool has_file = !spec.schedule().actions_file().empty();
  if (kind == CUSTOM || has_file) {
    if (kind != CUSTOM)
      c.fail("schedule.actions_file", "an actions file gives a CUSTOM schedule, but schedule.kind is " + name,
             "set kind: CUSTOM, or remove actions_file");
    if (!has_file)
      c.fail("schedule.kind", "CUSTOM needs schedule.actions_file, the order each pipeline rank runs",
             "name a schedule file (`lacuna compile SCENARIO --dump-schedule FILE` writes one to start from)");
    if (spec.model().encoders_size() > 0)
      c.fail("schedule.kind", "a CUSTOM schedule orders the LLM's pipeline; placements of encoders build their own",
             "remove the encoders, or use a built-in schedule");
    if (p.microbatch_group_size_per_vp_stage() != 0)
      c.fail("parallel.microbatch_group_size_per_vp_stage",
             "a CUSTOM schedule's file gives the order; a microbatch group applies to INTERLEAVED_1F1B only",
             "remove it");
    return;
  }
  if (kind == INTERLEAVED_1F1B) {
    if (p.pp() < 2)
      c.fail("schedule.kind", "INTERLEAVED_1F1B needs pp ≥ 2 (pp is " + s(p.pp()) + ")",
             "use ONE_F_ONE_B with virtual_stages: 1 when pp is 1");
    if (v < 2)
      c.fail("parallel.virtual_stages", "INTERLEAVED_1F1B needs virtual_stages ≥ 2, got " + s(v),
             "set virtual_stages to the model chunks per pipeline rank (≥ 2), or use ONE_F_ONE_B");
    const int64_t m = num_microbatches(spec);
    const int64_t n = p.microbatch_group_size_per_vp_stage();
    if (n < 0)
      c.fail("parallel.microbatch_group_size_per_vp_stage", "must not be negative, got " + s(n),
             "0 (pp, Megatron-LM's default) or a group in [pp, microbatches]");
    if (n == 0 && m % p.pp() != 0)
      c.fail("training.global_batch",
             "INTERLEAVED_1F1B needs the microbatches per pipeline (global_batch / (micro_batch × dp) = " + s(m) +
                 ") to be a multiple of pp (" + s(p.pp()) + ")",
             "as Megatron-LM requires: change global_batch, micro_batch or dp so that it is");
    if (n > 0 && (n < p.pp() || n > m))
      c.fail("parallel.microbatch_group_size_per_vp_stage",
             "a group of " + s(n) + " microbatches must lie in [pp, microbatches] = [" + s(p.pp()) + ", " + s(m) +
                 "], as Megatron-Core requires",
             "0 (pp, Megatron-LM's default) or a group in that range");
    else if (n > 0 && m % n != 0 && m % n < p.pp())
      c.fail("parallel.microbatch_group_size_per_vp_stage",
             "grouping " + s(m) + " microbatches by " + s(n) + " leaves a last group of " + s(m % n) +
                 ", fewer than pp (" + s(p.pp()) + "): Megatron-Core refuses it (dependency bubbles)",
             "a group that divides the microbatches, or leaves at least pp");
    return;
  }
  if (p.microbatch_group_size_per_vp_stage() != 0)
    c.fail("parallel.microbatch_group_size_per_vp_stage",
           "a microbatch group per virtual stage applies to INTERLEAVED_1F1B only, not " + name,
           "remove it, or use INTERLEAVED_1F1B");
  if (v != 1) {
    if (kind == ZB_H1)
      c.fail("parallel.virtual_stages",
             "ZB_H1 runs one model chunk per pipeline rank; virtual_stages is " + s(v),
             "set virtual_stages: 1, or use INTERLEAVED_1F1B for model chunks");
    c.fail("parallel.virtual_stages", name + " needs virtual_stages = 1, got " + s(v),
           "set virtual_stages: 1, or use INTERLEAVED_1F1B");
  }
}

void check_precision(const Scenario& spec, const Checker& c) {
  const auto& g = spec.cluster().gpu();
  const auto prec = spec.training().precision();
  bool has = false;
  std::string field;
  switch (prec) {
    case BF16: has = g.has_peak_bf16_tflops(); field = "peak_bf16_tflops"; break;
    case FP16: has = g.has_peak_fp16_tflops(); field = "peak_fp16_tflops"; break;
    case FP8: has = g.has_peak_fp8_tflops(); field = "peak_fp8_tflops"; break;
    case FP32: has = g.has_peak_fp32_tflops(); field = "peak_fp32_tflops"; break;
    default: return;  // rejected by validate_training
  }
  if (has) return;
  const auto& preset = spec.cluster().preset();
  if (!preset.empty())
    c.fail("training.precision",
           "precision " + Precision_Name(prec) + " is not supported by the GPU of preset \"" + preset +
               "\" (it has no " + field + ")",
           prec == FP8 ? "use BF16 (FP8 needs Hopper or Blackwell: preset \"h100-sxm\", \"h200-sxm\", \"b200\", \"gb200-nvl72\" or \"gb300-nvl72\")" : "use BF16");
  c.fail("cluster.gpu." + field, "is not set (needed by precision " + Precision_Name(prec) + ")",
         "set it or use preset: \"h100-sxm\"");
}

void check_size(const Scenario& spec, const Checker& c) {
  const auto& m = spec.model().llm();
  const __int128 elements = static_cast<__int128>(spec.training().micro_batch()) * m.seq_length() * m.hidden_size();
  if (elements > Limits::kActivationElements)
    c.fail("training.micro_batch",
           "one microbatch's activations (micro_batch × seq_length × hidden_size) exceed 2^50 elements",
           "reduce micro_batch or seq_length");
  const auto stages = layers_per_virtual_stage(spec);
  const int64_t pp = spec.parallel().pp();
  int64_t most = 0;
  int64_t all_layers = 0;
  for (const int64_t n : stages) all_layers += n;
  for (int64_t r = 0; r < pp; ++r) {
    int64_t n = 0;
    for (size_t k = static_cast<size_t>(r); k < stages.size(); k += static_cast<size_t>(pp)) n += stages[k];
    most = std::max(most, n);
  }
  const int64_t mb = num_microbatches(spec);
  const double ops = static_cast<double>(mb) * static_cast<double>(most) * Limits::kOpsPerLayerMicrobatch;
  if (ops > Limits::kOpsPerRank)
    c.fail("training.global_batch",
           "the program would hold about " + Checker::fmt(ops) + " ops per pipeline rank (" + s(mb) +
               " microbatches × " + s(most) + " layers × ~60), above the supported " +
               Checker::fmt(Limits::kOpsPerRank),
           "reduce global_batch (or raise micro_batch or dp), or use more pipeline stages");
  // Per rank is not enough: 10^5 layers over pp 100 stay under it on every
  // rank and still make a program of 10^8 ops (issue 16's bad_alloc).
  const double program_ops = static_cast<double>(mb) * static_cast<double>(all_layers) * Limits::kOpsPerLayerMicrobatch;
  if (program_ops > Limits::kOpsPerProgram)
    c.fail("model.llm.num_layers",
           "the program would hold about " + Checker::fmt(program_ops) + " ops in all (" + s(mb) +
               " microbatches × " + s(all_layers) + " layers × ~60), about " +
               Checker::fmt(program_ops * 220 / 1e9) + " GB while compiling, above the supported " +
               Checker::fmt(Limits::kOpsPerProgram) + " ops (docs/reliability.md#bounded-runs)",
           "reduce num_layers or global_batch (or raise micro_batch or dp)");
}

}  // namespace

void validate_consistency(const Scenario& spec, const Checker& c) {
  check_tensor_and_context(spec, c);
  check_world_and_batch(spec, c);
  check_layers(spec, c);
  check_recompute(spec, c);
  check_schedule(spec, c);
  check_precision(spec, c);
  validate_fp8(spec, c);
  check_size(spec, c);
}

}  // namespace lacuna::scenario
