#include "sim/placement/megatron_encoder_pp.h"

#include <numeric>
#include <string>

#include "sim/core/error.h"
#include "sim/scenario/encoder_pipeline.h"

namespace lacuna::placement {
namespace {

std::string s(int64_t v) { return std::to_string(v); }

}  // namespace

scenario::LoadedScenario encoder_pp_scenario(const scenario::LoadedScenario& scenario) {
  const auto& spec = scenario.spec;
  const auto& par = spec.parallel();
  auto fail = [&](const std::string& field, const std::string& what, const std::string& fix) {
    throw Error(scenario.locations.locate(field), what, fix);
  };
  // Megatron's encoder pipeline is LLaVA's: one vision model (and projector).
  if (spec.model().encoders_size() != 1)
    fail("model.encoders",
         "MEGATRON_ENCODER_PP is Megatron-LM's encoder pipeline, which holds one encoder (LLaVA's vision model); "
         "the model has " + s(spec.model().encoders_size()),
         "use HETEROGENEOUS (an island per encoder), or one encoder");
  const auto& enc = spec.model().encoders(0);
  const scenario::EncoderPipelineDims d = scenario::megatron_encoder_pp_dims(spec);
  const int64_t llm_tp = std::max<int64_t>(1, par.tp());
  if (enc.has_layout()) {
    const auto& l = enc.layout();
    if (l.dp() != d.dp)
      fail("model.encoders[0].layout.dp",
           "Megatron's encoder ranks share the LLM's data parallelism (world = dp · (encoder tp·pp·cp + tp·pp·cp), "
           "megatron/core/parallel_state.py); layout.dp is " + s(l.dp()) + ", the LLM's dp " + s(d.dp),
           "set the encoder layout's dp to " + s(d.dp) + " for MEGATRON_ENCODER_PP");
    if (l.cp() != d.cp)
      fail("model.encoders[0].layout.cp",
           "Megatron's encoder and LLM share one context-parallel size; layout.cp is " + s(l.cp()) +
               ", the LLM's cp " + s(d.cp),
           "set the encoder layout's cp to " + s(d.cp));
  }
  // megatron/training/arguments.py validate_args: encoder tp ≤ tp.
  if (d.tp > llm_tp)
    fail(d.tp_field,
         "encoder tp = " + s(d.tp) + " exceeds the LLM's tp = " + s(llm_tp) +
             "; Megatron-LM does not support encoders with more TP than the decoder",
         "choose an encoder tp ≤ " + s(llm_tp));
  const auto& t = enc.transformer();
  const int64_t kv = t.num_kv_heads() > 0 ? t.num_kv_heads() : t.num_attention_heads();
  if (t.num_attention_heads() % d.tp != 0 || kv % d.tp != 0)
    fail(d.tp_field,
         "encoder tp = " + s(d.tp) + " must divide the encoder's attention heads (" + s(t.num_attention_heads()) +
             ") and key/value heads (" + s(kv) + ")",
         "choose an encoder tp dividing " + s(std::gcd(t.num_attention_heads(), kv)) +
             " (model.encoders[0].layout.tp)");
  if (t.num_layers() % d.pp != 0)
    fail(d.pp_field, "encoder pp = " + s(d.pp) + " must divide the encoder's " + s(t.num_layers()) + " layers",
         "choose an encoder pp dividing " + s(t.num_layers()));
  // The encoder's ranks come on top of the LLM's.
  const int64_t llm_world = llm_tp * std::max<int64_t>(1, par.pp()) * d.cp * d.dp;
  const int64_t need = llm_world + d.world();
  const int64_t gpn = spec.cluster().gpus_per_node();
  const int64_t have = scenario::num_gpus(spec);
  if (have != need) {
    std::string fix = need % gpn == 0 ? "set cluster.num_nodes: " + s(need / gpn)
                                      : "choose an encoder tp·pp (or the LLM's dp) so that " + s(need) +
                                            " GPUs fill whole nodes of " + s(gpn);
    fail("cluster.num_nodes",
         "MEGATRON_ENCODER_PP runs the encoder on dp·encoder tp·pp·cp = " + s(d.world()) +
             " ranks of its own besides the LLM's " + s(llm_world) + " (Megatron's world = dp · (encoder tp·pp·cp + "
             "tp·pp·cp) = " + s(need) + "); the cluster has " + s(have) + " GPUs",
         fix + ", or use a placement on the LLM's GPUs");
  }

  scenario::LoadedScenario out = scenario;
  auto* l = out.spec.mutable_model()->mutable_encoders(0)->mutable_layout();
  const bool had_layout = enc.has_layout();
  l->set_tp(d.tp);
  l->set_pp(d.pp);
  l->set_cp(d.cp);
  l->set_dp(d.dp);
  l->set_first_rank(llm_world);
  l->set_virtual_stages(1);
  // Megatron's vision TransformerConfig copies the language model's
  // sequence_parallel and recompute settings (examples/multimodal/model.py).
  l->set_sequence_parallel(par.sequence_parallel() && d.tp > 1);
  if (!had_layout) {
    l->set_recompute(par.recompute());
    l->set_recompute_num_layers(0);
    l->set_rank_order(par.rank_order());
  }
  out.spec.mutable_placement()->set_kind(scenario::HETEROGENEOUS);
  // core_v0.9.0 – core_v0.11.0: "Interleaving is not supported with an encoder
  // and decoder model" (pipeline_parallel/schedules.py); core_v0.12.0 –
  // core_v0.13.1: "Interleaved schedule not supported for model with encoder
  // on separate PP rank" (training/training.py). Megatron runs 1F1B then.
  if (out.spec.schedule().kind() == scenario::INTERLEAVED_1F1B) {
    out.spec.mutable_schedule()->set_kind(scenario::ONE_F_ONE_B);
    out.spec.mutable_parallel()->set_virtual_stages(1);
    out.spec.mutable_parallel()->clear_layers_per_stage();
  }
  return out;
}

}  // namespace lacuna::placement
