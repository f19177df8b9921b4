#include "sim/scenario/moe.h"

#include <algorithm>
#include <string>

namespace lacuna::scenario {

bool has_moe(const Scenario& spec) { return spec.model().llm().moe().num_experts() > 0; }

Moe resolve_moe(const Scenario& spec) {
  Moe m = spec.model().llm().moe();
  if (m.expert_ffn_hidden_size() <= 0) m.set_expert_ffn_hidden_size(spec.model().llm().ffn_hidden_size());
  if (m.layer_frequency() <= 0) m.set_layer_frequency(1);
  if (m.dispatcher() == DISPATCHER_UNSPECIFIED) m.set_dispatcher(DISPATCHER_ALLGATHER);
  if (!m.has_grouped_gemm()) m.set_grouped_gemm(false);
  if (m.top_k() <= 0) m.set_top_k(1);
  return m;
}

int64_t resolved_ep(const Scenario& spec) { return spec.parallel().ep() > 0 ? spec.parallel().ep() : 1; }

int64_t resolved_expert_tp(const Scenario& spec) {
  if (spec.parallel().expert_tp() > 0) return spec.parallel().expert_tp();
  return spec.parallel().tp() > 0 ? spec.parallel().tp() : 1;
}

int64_t expert_dp(const Scenario& spec) {
  const auto& p = spec.parallel();
  const int64_t ranks = std::max<int64_t>(p.tp(), 1) * std::max<int64_t>(p.cp(), 1) * std::max<int64_t>(p.dp(), 1);
  return std::max<int64_t>(ranks / (resolved_ep(spec) * resolved_expert_tp(spec)), 1);
}

void validate_moe(const Scenario& spec, const Checker& c) {
  const Moe& m = spec.model().llm().moe();
  const ParallelPlan& p = spec.parallel();
  const std::string base = "model.llm.moe.";
  // MoE is modelled in the LLM only: an encoder's experts would be silently
  // dense, so they are refused (docs/moe.md#scope).
  for (int e = 0; e < spec.model().encoders_size(); ++e) {
    const auto& enc = spec.model().encoders(e);
    const std::string at = "model.encoders[" + std::to_string(e) + "].";
    if (enc.transformer().has_moe() && enc.transformer().moe().num_experts() != 0)
      c.fail(at + "transformer.moe.num_experts", "mixture-of-experts encoders are not modelled",
             "remove the encoder's moe block (MoE is supported in model.llm)");
    if (enc.layout().ep() > 1 || enc.layout().expert_tp() > 0)
      c.fail(at + "layout." + (enc.layout().ep() > 1 ? "ep" : "expert_tp"),
             "expert parallelism in an encoder layout needs a MoE encoder, which is not modelled",
             "remove it (the LLM's ep and expert_tp are set in parallel)");
  }
  if (m.num_experts() < 0) c.fail(base + "num_experts", "must be ≥ 0, got " + std::to_string(m.num_experts()),
                                  "set the routed experts per MoE layer, or 0 for a dense model");
  if (!has_moe(spec)) {
    // Any MoE setting without experts is a mistake (a misspelt or forgotten
    // num_experts), never silently ignored.
    auto unused = [&](const std::string& field, bool set) {
      if (set)
        c.fail(base + field, "is set but model.llm.moe.num_experts is not",
               "set num_experts (routed experts per MoE layer) or remove the field");
    };
    unused("top_k", m.top_k() != 0);
    unused("expert_ffn_hidden_size", m.expert_ffn_hidden_size() != 0);
    unused("shared_expert_ffn_hidden_size", m.shared_expert_ffn_hidden_size() != 0);
    unused("layer_frequency", m.layer_frequency() != 0);
    unused("first_dense_layers", m.first_dense_layers() != 0);
    unused("capacity_factor", m.capacity_factor() != 0);
    unused("pad_to_capacity", m.pad_to_capacity());
    unused("dispatcher", m.dispatcher() != DISPATCHER_UNSPECIFIED);
    unused("grouped_gemm", m.has_grouped_gemm());
    unused("routing", m.has_routing());
    if (p.ep() > 1)
      c.fail("parallel.ep", "is " + std::to_string(p.ep()) + " but the model has no experts",
             "set model.llm.moe.num_experts, or remove parallel.ep");
    if (p.expert_tp() != 0 && p.expert_tp() != std::max<int64_t>(p.tp(), 1))
      c.fail("parallel.expert_tp", "is set but the model has no experts",
             "set model.llm.moe.num_experts, or remove parallel.expert_tp");
    return;
  }
  c.count(base + "num_experts", m.num_experts(), 1 << 16);
  // Megatron-Core refuses MoE with TP but without SP in training
  // (megatron/core/transformer/moe/moe_layer.py forward: "During training,
  // performance may degrade if MoE and tensor parallelism are enabled without
  // also enabling sequence parallelism" is a ValueError).
  if (p.tp() > 1 && !p.sequence_parallel())
    c.fail("parallel.sequence_parallel", "must be true for mixture-of-experts layers with tp > 1",
           "set sequence_parallel: true (Megatron-Core raises without it), or tp: 1");
  // Megatron-Core's MoE layers are sequential blocks (TransformerLayer with
  // a MoELayer MLP); lacuna's parallel attention + MLP layer has no MoE form.
  if (spec.model().llm().parallel_attention_mlp())
    c.fail("model.llm.parallel_attention_mlp", "is not supported with mixture-of-experts layers",
           "set parallel_attention_mlp: false, or remove model.llm.moe");
  c.count(base + "top_k", m.top_k(), 1 << 16, "set top_k: the experts each token is routed to (at least 1)");
  if (m.top_k() > m.num_experts())
    c.fail(base + "top_k",
           "is " + std::to_string(m.top_k()) + ", above num_experts " + std::to_string(m.num_experts()),
           "route each token to at most num_experts experts");
  const int64_t ffn = spec.model().llm().ffn_hidden_size();
  if (m.expert_ffn_hidden_size() < 0)
    c.fail(base + "expert_ffn_hidden_size", "must be ≥ 0", "use 0 (the dense ffn_hidden_size) or a positive width");
  if (m.shared_expert_ffn_hidden_size() < 0)
    c.fail(base + "shared_expert_ffn_hidden_size", "must be ≥ 0", "use 0 (no shared experts) or a positive width");
  if (m.layer_frequency() < 0)
    c.fail(base + "layer_frequency", "must be ≥ 0", "use 1 (every layer MoE) or N (every N-th layer)");
  const int64_t layers = spec.model().llm().num_layers();
  if (m.first_dense_layers() < 0 || m.first_dense_layers() >= layers)
    c.fail(base + "first_dense_layers",
           "is " + std::to_string(m.first_dense_layers()) + "; it must lie in [0, num_layers = " +
               std::to_string(layers) + ")",
           "keep at least one MoE layer");
  // 0 is dropless. Below 1 the experts drop tokens even when routing is
  // balanced: the step computes less than the model FLOPs that MFU credits
  // it with (6·N·D counts every token), so its MFU would overstate, past 1
  // for small factors. 64: far above practice (Megatron-LM's examples use
  // 1.0 to 2.0), low enough to keep the capacity arithmetic in range.
  c.real(base + "capacity_factor", m.capacity_factor(), 64, true);
  if (m.capacity_factor() > 0 && m.capacity_factor() < 1)
    c.fail(base + "capacity_factor",
           "is " + Checker::fmt(m.capacity_factor()) +
               "; it must be 0 (dropless) or at least 1 (below 1 experts drop tokens even under balanced routing, and "
               "MFU, which credits every token, would overstate)",
           "use 0 or a factor ≥ 1 (Megatron-LM examples use 1.0 to 2.0)");
  // Megatron-Core: "moe_expert_capacity_factor must be set to use
  // moe_pad_expert_input_to_capacity" (transformer_config.py).
  if (m.pad_to_capacity() && m.capacity_factor() <= 0)
    c.fail(base + "pad_to_capacity", "needs a capacity_factor > 0 (dropless experts have no capacity to pad to)",
           "set capacity_factor, or remove pad_to_capacity");
  c.enumeration_or_unset(base + "dispatcher", m.dispatcher());
  // The flex (DeepEP) dispatcher does not pad to capacity
  // (transformer_config.py: moe_pad_expert_input_to_capacity with
  // moe_token_dispatcher_type "flex" raises).
  if (m.dispatcher() == DISPATCHER_HIERARCHICAL && m.pad_to_capacity())
    c.fail(base + "pad_to_capacity", "is not supported by the hierarchical (flex, DeepEP) dispatcher",
           "use DISPATCHER_ALLTOALL or DISPATCHER_ALLGATHER, or remove pad_to_capacity");
  c.enumeration_or_unset(base + "routing.distribution", m.routing().distribution());
  if (m.routing().distribution() == ROUTING_DIRICHLET_MULTINOMIAL)
    c.real(base + "routing.dirichlet_alpha", m.routing().dirichlet_alpha(), 1e9, false);
  else if (m.routing().dirichlet_alpha() != 0)
    c.real(base + "routing.dirichlet_alpha", m.routing().dirichlet_alpha(), 1e9, true);

  // Parallelism (Megatron-LM training/arguments.py: "Number of experts should
  // be a multiple of expert model parallel_size"; parallel_state.py: world
  // size divisible by expert_tp · ep · pp).
  if (p.ep() < 0) c.fail("parallel.ep", "must be ≥ 0", "use 0 or 1 (no expert parallelism) or the EP size");
  if (p.expert_tp() < 0) c.fail("parallel.expert_tp", "must be ≥ 0", "use 0 (= tp) or the expert TP size");
  const int64_t ep = resolved_ep(spec), etp = resolved_expert_tp(spec);
  if (m.num_experts() % ep != 0)
    c.fail("parallel.ep",
           "ep " + std::to_string(ep) + " does not divide num_experts " + std::to_string(m.num_experts()),
           "choose an ep that divides model.llm.moe.num_experts");
  const int64_t ranks = std::max<int64_t>(p.tp(), 1) * std::max<int64_t>(p.cp(), 1) * std::max<int64_t>(p.dp(), 1);
  if (ranks % (ep * etp) != 0)
    c.fail(p.ep() > 1 ? "parallel.ep" : "parallel.expert_tp",
           "expert_tp · ep = " + std::to_string(etp) + " · " + std::to_string(ep) +
               " does not divide the ranks of a pipeline stage, tp · cp · dp = " + std::to_string(ranks),
           "Megatron-Core regroups each stage's tp·cp·dp ranks as expert_tp × ep × expert_dp: choose ep and "
           "expert_tp whose product divides tp·cp·dp");
  const int64_t effn = m.expert_ffn_hidden_size() > 0 ? m.expert_ffn_hidden_size() : ffn;
  if (effn % etp != 0)
    c.fail(p.expert_tp() > 0 ? "parallel.expert_tp" : "model.llm.moe.expert_ffn_hidden_size",
           "expert_tp " + std::to_string(etp) + " does not divide the expert FFN width " + std::to_string(effn),
           "choose an expert_tp that divides expert_ffn_hidden_size");
  if (m.shared_expert_ffn_hidden_size() % std::max<int64_t>(p.tp(), 1) != 0)
    c.fail(base + "shared_expert_ffn_hidden_size",
           std::to_string(m.shared_expert_ffn_hidden_size()) + " is not a multiple of tp " + std::to_string(p.tp()),
           "shared experts are split over TP like the dense MLP: use a multiple of tp");
}

}  // namespace lacuna::scenario
