#include "sim/importer/hf_import.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "sim/core/error.h"
#include "sim/core/int_math.h"
#include "sim/importer/json_config.h"

namespace lacuna::importer {

namespace {

using scenario::Transformer;

// ---------------------------------------------------------------- families

enum class Text { kNone, kLlama, kQwen2, kQwen3, kQwen2Moe, kQwen3Moe, kMixtral, kDeepseekV3 };
enum class Vision { kNone, kVit, kClip, kSiglip, kInternVit, kQwen2Vl, kQwen25Vl, kQwen3Vl };

Text text_family(const std::string& arch, const std::string& type) {
  static const std::map<std::string, Text> by_arch = {
      {"LlamaForCausalLM", Text::kLlama},         {"MistralForCausalLM", Text::kLlama},
      {"Qwen2ForCausalLM", Text::kQwen2},         {"Qwen3ForCausalLM", Text::kQwen3},
      {"Qwen2MoeForCausalLM", Text::kQwen2Moe},   {"Qwen3MoeForCausalLM", Text::kQwen3Moe},
      {"MixtralForCausalLM", Text::kMixtral},     {"DeepseekV3ForCausalLM", Text::kDeepseekV3}};
  static const std::map<std::string, Text> by_type = {
      {"llama", Text::kLlama},        {"mistral", Text::kLlama},         {"qwen2", Text::kQwen2},
      {"qwen3", Text::kQwen3},        {"qwen2_moe", Text::kQwen2Moe},    {"qwen3_moe", Text::kQwen3Moe},
      {"mixtral", Text::kMixtral},    {"deepseek_v3", Text::kDeepseekV3},
      // The text halves of the Qwen-VL configs.
      {"qwen2_vl_text", Text::kQwen2}, {"qwen2_5_vl_text", Text::kQwen2}, {"qwen3_vl_text", Text::kQwen3},
      {"qwen3_vl_moe_text", Text::kQwen3Moe}};
  if (auto it = by_arch.find(arch); it != by_arch.end()) return it->second;
  if (auto it = by_type.find(type); it != by_type.end()) return it->second;
  return Text::kNone;
}

Vision vision_family(const std::string& arch, const std::string& type) {
  static const std::map<std::string, Vision> by_type = {
      {"vit", Vision::kVit},           {"clip_vision_model", Vision::kClip},
      {"siglip_vision_model", Vision::kSiglip}, {"intern_vit_6b", Vision::kInternVit},
      {"qwen2_vl", Vision::kQwen2Vl},  {"qwen2_5_vl", Vision::kQwen25Vl}, {"qwen3_vl", Vision::kQwen3Vl},
      {"qwen3_vl_moe", Vision::kQwen3Vl}};
  if (arch == "ViTModel" || arch == "ViTForImageClassification") return Vision::kVit;
  if (arch == "CLIPVisionModel") return Vision::kClip;
  if (arch == "SiglipVisionModel") return Vision::kSiglip;
  if (arch == "InternVisionModel") return Vision::kInternVit;
  if (auto it = by_type.find(type); it != by_type.end()) return it->second;
  return Vision::kNone;
}

const char* kMapped =
    "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen2MoeForCausalLM, "
    "Qwen3MoeForCausalLM, MixtralForCausalLM, DeepseekV3ForCausalLM; vision encoders ViT, CLIP, SigLIP, InternViT; "
    "multimodal LLaVA, InternVL, Qwen2-VL, Qwen2.5-VL, Qwen3-VL (vision_config + text_config)";

// Values of keys a config may leave to its class's __init__ defaults (LLaVA's
// text_config and vision_config do): transformers'
// models/llama/configuration_llama.py, models/clip/configuration_clip.py,
// models/siglip/configuration_siglip.py.
const std::map<std::string, int64_t>* class_defaults(const std::string& type) {
  static const std::map<std::string, std::map<std::string, int64_t>> table = {
      {"llama",
       {{"hidden_size", 4096}, {"intermediate_size", 11008}, {"num_hidden_layers", 32}, {"num_attention_heads", 32},
        {"vocab_size", 32000}, {"max_position_embeddings", 2048}}},
      {"clip_vision_model",
       {{"hidden_size", 768}, {"intermediate_size", 3072}, {"num_hidden_layers", 12}, {"num_attention_heads", 12},
        {"image_size", 224}, {"patch_size", 32}}},
      {"siglip_vision_model",
       {{"hidden_size", 768}, {"intermediate_size", 3072}, {"num_hidden_layers", 12}, {"num_attention_heads", 12},
        {"image_size", 224}, {"patch_size", 16}}}};
  auto it = table.find(type);
  return it == table.end() ? nullptr : &it->second;
}

// Reads required integers of one config object, recording their source and
// collecting the missing ones so that one error names them all.
struct Reader {
  const JsonConfig& c;
  Annotated& a;
  std::string type;  // model_type, for class defaults
  std::vector<std::string>& missing;

  int64_t need(const std::string& key, const std::string& path) {
    if (auto v = c.integer(key)) {
      a.from(path, c.where(key));
      return *v;
    }
    if (const auto* d = class_defaults(type)) {
      if (auto it = d->find(key); it != d->end()) {
        a.from(path, fmt::format("default: transformers' {} config default for {}", type, key));
        return it->second;
      }
    }
    missing.push_back(c.prefix() + key);
    return 0;
  }
  int64_t value(const std::string& key) {  // without a scenario field of its own
    if (auto v = c.integer(key)) return *v;
    if (const auto* d = class_defaults(type))
      if (auto it = d->find(key); it != d->end()) return it->second;
    missing.push_back(c.prefix() + key);
    return 0;
  }
};

[[noreturn]] void missing_keys(const std::string& file, const std::vector<std::string>& missing,
                               const std::string& what) {
  std::string list;
  for (const auto& k : missing) list += (list.empty() ? "" : ", ") + k;
  throw Error(SourceLocation{file, 0, 0, missing.front()},
              fmt::format("{} lacks {} needed to describe the model", what, list),
              "use the model's complete config.json from the Hugging Face Hub");
}

std::string first_architecture(const JsonConfig& c) {
  const auto archs = c.strings("architectures");
  return archs.empty() ? std::string() : archs.front();
}

// ---------------------------------------------------------------- the LLM

void map_moe(const JsonConfig& c, Text family, Annotated& a, std::vector<std::string>& missing) {
  auto& moe = *a.spec.mutable_model()->mutable_llm()->mutable_moe();
  const std::string p = "model.llm.moe.";
  Reader r{c, a, "", missing};
  switch (family) {
    case Text::kMixtral:
      moe.set_num_experts(r.need("num_local_experts", p + "num_experts"));
      moe.set_top_k(r.need("num_experts_per_tok", p + "top_k"));
      moe.set_expert_ffn_hidden_size(r.need("intermediate_size", p + "expert_ffn_hidden_size"));
      break;
    case Text::kQwen2Moe:
    case Text::kQwen3Moe: {
      moe.set_num_experts(r.need("num_experts", p + "num_experts"));
      moe.set_top_k(r.need("num_experts_per_tok", p + "top_k"));
      moe.set_expert_ffn_hidden_size(r.need("moe_intermediate_size", p + "expert_ffn_hidden_size"));
      if (auto shared = c.integer("shared_expert_intermediate_size"); shared && *shared > 0) {
        moe.set_shared_expert_ffn_hidden_size(*shared);
        a.from(p + "shared_expert_ffn_hidden_size", c.where("shared_expert_intermediate_size"));
      }
      if (auto step = c.integer("decoder_sparse_step"); step && *step > 1) {
        moe.set_layer_frequency(*step);
        a.from(p + "layer_frequency", c.where("decoder_sparse_step"));
      }
      // mlp_only_layers: dense layers by index; lacuna models a leading run.
      const auto dense = c.integers("mlp_only_layers");
      int64_t leading = 0;
      while (leading < static_cast<int64_t>(dense.size()) && dense[static_cast<size_t>(leading)] == leading) ++leading;
      if (leading > 0) {
        moe.set_first_dense_layers(leading);
        a.from(p + "first_dense_layers", c.where("mlp_only_layers") + " (leading dense layers)");
      }
      if (leading < static_cast<int64_t>(dense.size()))
        a.warnings.push_back(c.where("mlp_only_layers") +
                             ": dense layers other than a leading run are not modelled; they are MoE layers here");
      break;
    }
    case Text::kDeepseekV3: {
      moe.set_num_experts(r.need("n_routed_experts", p + "num_experts"));
      moe.set_top_k(r.need("num_experts_per_tok", p + "top_k"));
      const int64_t width = r.need("moe_intermediate_size", p + "expert_ffn_hidden_size");
      moe.set_expert_ffn_hidden_size(width);
      if (auto shared = c.integer("n_shared_experts"); shared && *shared > 0) {
        const std::optional<int64_t> total = checked_mul(*shared, width);
        if (!total)
          throw Error(SourceLocation{c.file(), 0, 0, c.prefix() + "n_shared_experts"},
                      fmt::format("n_shared_experts {} × moe_intermediate_size {} overflows a 64-bit width", *shared,
                                  width),
                      "check both keys: a shared expert is as wide as moe_intermediate_size");
        moe.set_shared_expert_ffn_hidden_size(*total);
        a.from(p + "shared_expert_ffn_hidden_size", c.where("n_shared_experts") + " × moe_intermediate_size");
      }
      if (auto k = c.integer("first_k_dense_replace"); k && *k > 0) {
        moe.set_first_dense_layers(*k);
        a.from(p + "first_dense_layers", c.where("first_k_dense_replace"));
      }
      if (auto f = c.integer("moe_layer_freq"); f && *f > 1) {
        moe.set_layer_frequency(*f);
        a.from(p + "layer_frequency", c.where("moe_layer_freq"));
      }
      // Read so they count as mapped: routing details lacuna does not model
      // (the load distribution is moe.routing's).
      for (const char* k : {"n_group", "topk_group", "topk_method", "scoring_func", "norm_topk_prob",
                            "routed_scaling_factor", "aux_loss_alpha", "seq_aux", "ep_size"})
        (void)c.has(k);
      a.add_note("model.llm.moe",
                 "Router details (n_group, topk_group, scoring_func, routed_scaling_factor) are not modelled: "
                 "the per-expert load comes from moe.routing (docs/moe.md#load-imbalance).");
      break;
    }
    default:
      return;
  }
}

void map_llm(const JsonConfig& c, Text family, const std::string& arch, const LayoutOptions& layout, Annotated& a) {
  auto& t = *a.spec.mutable_model()->mutable_llm();
  const std::string p = "model.llm.";
  std::vector<std::string> missing;
  const std::string type = c.string("model_type").value_or("");
  // Class defaults only for a config that names its class (LLaVA's text_config: "llama").
  Reader r{c, a, type, missing};
  t.set_name(c.string("_name_or_path").value_or(std::filesystem::path(c.file()).stem().string()));
  a.from(p + "name", c.has("_name_or_path") ? c.where("_name_or_path") : "the config file's name");
  const int64_t layers = r.need("num_hidden_layers", p + "num_layers");
  const int64_t hidden = r.need("hidden_size", p + "hidden_size");
  const int64_t heads = r.need("num_attention_heads", p + "num_attention_heads");
  t.set_num_layers(layers);
  t.set_hidden_size(hidden);
  t.set_num_attention_heads(heads);
  if (auto kv = c.integer("num_key_value_heads")) {
    t.set_num_kv_heads(*kv);
    a.from(p + "num_kv_heads", c.where("num_key_value_heads"));
  } else {
    t.set_num_kv_heads(heads);
    a.from(p + "num_kv_heads", "default: num_attention_heads (no num_key_value_heads: multi-head attention)");
  }
  t.set_ffn_hidden_size(r.need("intermediate_size", p + "ffn_hidden_size"));
  if (family == Text::kQwen2Moe || family == Text::kQwen3Moe || family == Text::kDeepseekV3)
    a.source[p + "ffn_hidden_size"] += " (the dense layers' MLP)";

  const std::string act = c.string("hidden_act").value_or("silu");
  if (act == "silu" || act == "swish") {
    t.set_activation(scenario::SWIGLU);
    a.from(p + "activation", c.has("hidden_act") ? c.where("hidden_act") + " (gated SiLU MLP)"
                                                 : "default: SiLU-gated MLP of this family");
  } else {
    t.set_activation(scenario::GELU);
    a.from(p + "activation", c.where("hidden_act"));
    a.warnings.push_back(c.where("hidden_act") + " = \"" + act + "\": modelled as GELU");
  }
  t.set_norm(scenario::RMSNORM);
  a.from(p + "norm", c.has("rms_norm_eps") ? c.where("rms_norm_eps") + " (RMSNorm)" : "default: RMSNorm of this family");
  (void)c.number("rms_norm_eps");
  t.set_vocab_size(r.need("vocab_size", p + "vocab_size"));

  const int64_t max_pos = r.value("max_position_embeddings");
  if (layout.seq_length.value) {
    t.set_seq_length(*layout.seq_length.value);
    a.from(p + "seq_length", layout.seq_length.source);
  } else {
    t.set_seq_length(std::min<int64_t>(4096, max_pos > 0 ? max_pos : 4096));
    a.from(p + "seq_length", fmt::format("default: min(4096, max_position_embeddings = {}); set --seq-length", max_pos));
  }
  t.set_position_embedding(Transformer::POSITION_ROTARY);
  a.from(p + "position_embedding", c.has("rope_theta") ? c.where("rope_theta") + " (RoPE)" : "default: RoPE of this family");
  (void)c.number("rope_theta");
  (void)c.has("rope_scaling");
  // transformers' LlamaConfig, Qwen2Config, MixtralConfig and DeepseekV3Config
  // all default tie_word_embeddings to false.
  const bool tied = c.boolean("tie_word_embeddings").value_or(false);
  if (!tied) {
    t.set_untie_embeddings_and_output_weights(true);
    a.from(p + "untie_embeddings_and_output_weights",
           c.has("tie_word_embeddings") ? c.where("tie_word_embeddings") + " = false"
                                        : "default: tie_word_embeddings false in this family's config class");
  }
  if (c.boolean("attention_bias").value_or(false) || family == Text::kQwen2)
    a.add_note(p + "name",
               "The q/k/v projection biases of this model are not modelled (linear_bias would add them to every "
               "linear layer; they are 3·h/tp parameters per layer).");
  if (auto d = c.number("attention_dropout"); d && *d > 0) {
    t.set_attention_dropout(*d);
    a.from(p + "attention_dropout", c.where("attention_dropout"));
  }
  // Sliding-window attention: Mistral/Mixtral whenever sliding_window is set;
  // Qwen only with use_sliding_window (and then above max_window_layers).
  const bool qwen = family == Text::kQwen2 || family == Text::kQwen3 || family == Text::kQwen2Moe ||
                    family == Text::kQwen3Moe;
  const auto window = c.integer("sliding_window");
  const bool use_window = qwen ? c.boolean("use_sliding_window").value_or(false) : window.has_value();
  (void)c.has("max_window_layers");
  if (use_window && window && *window > 0 && *window < t.seq_length()) {
    t.set_attention_window(*window);
    a.from(p + "attention_window", c.where("sliding_window"));
    if (qwen) a.add_note(p + "attention_window", "Qwen applies the window only above max_window_layers; here every layer has it.");
  }
  if (auto hd = c.integer("head_dim"); hd && heads > 0 && *hd * heads != hidden)
    a.add_note(p + "num_attention_heads",
               fmt::format("Approximation: head_dim {} × {} heads = {} ≠ hidden_size {}; lacuna's heads are "
                           "hidden_size / heads = {} wide, so the q/k/v/o projections and the attention core are "
                           "modelled {} × their real size.",
                           *hd, heads, *hd * heads, hidden, heads > 0 ? hidden / heads : 0,
                           fmt::format("{:.3g}", static_cast<double>(hidden) / static_cast<double>(*hd * heads))));
  if (family == Text::kDeepseekV3) {
    const int64_t q_lora = c.integer("q_lora_rank").value_or(0);
    const int64_t kv_lora = c.integer("kv_lora_rank").value_or(0);
    const int64_t nope = c.integer("qk_nope_head_dim").value_or(0);
    const int64_t rope = c.integer("qk_rope_head_dim").value_or(0);
    const int64_t v = c.integer("v_head_dim").value_or(0);
    a.add_note(p + "num_attention_heads",
               fmt::format("Approximation: Multi-head Latent Attention (q_lora_rank {}, kv_lora_rank {}, "
                           "qk_nope_head_dim {} + qk_rope_head_dim {} = {}-wide q/k heads, v_head_dim {}) is modelled "
                           "as multi-head attention with {} heads of hidden_size / heads = {}: the low-rank q/kv "
                           "down- and up-projections and the wider q/k heads are not modelled.",
                           q_lora, kv_lora, nope, rope, nope + rope, v, heads, heads > 0 ? hidden / heads : 0));
    if (auto mtp = c.integer("num_nextn_predict_layers"); mtp && *mtp > 0)
      a.add_note(p + "num_layers",
                 fmt::format("The {} multi-token-prediction layer(s) (num_nextn_predict_layers) are not modelled.", *mtp));
  }
  if (family == Text::kMixtral || family == Text::kQwen2Moe || family == Text::kQwen3Moe ||
      family == Text::kDeepseekV3)
    map_moe(c, family, a, missing);
  // Keys read only to count as mapped: they change no simulated cost.
  for (const char* k : {"bos_token_id", "eos_token_id", "pad_token_id", "torch_dtype", "transformers_version",
                        "use_cache", "initializer_range", "pretraining_tp", "mlp_bias", "architectures",
                        "model_type", "output_router_logits", "router_aux_loss_coef", "router_jitter_noise",
                        "norm_topk_prob", "tie_word_embeddings", "dtype", "layer_types", "rope_parameters"})
    (void)c.has(k);
  if (!missing.empty()) missing_keys(c.file(), missing, "the text model (" + (arch.empty() ? type : arch) + ")");
}

// ---------------------------------------------------------------- encoders

struct EncoderShape {
  int64_t tokens = 0;  // tokens per image the encoder runs
  int64_t merge = 1;   // encoder tokens per LLM token after the projector
};

EncoderShape map_encoder(const JsonConfig& c, Vision kind, const HfOptions& o, Annotated& a, int index) {
  auto& enc = *a.spec.mutable_model()->add_encoders();
  const std::string p = fmt::format("model.encoders[{}].", index);
  const std::string tp = p + "transformer.";
  auto& t = *enc.mutable_transformer();
  std::vector<std::string> missing;
  const std::string type = c.string("model_type").value_or("");
  Reader r{c, a, type, missing};
  t.set_name(c.string("_name_or_path").value_or(type.empty() ? "vision" : type));
  a.from(tp + "name", c.has("_name_or_path") ? c.where("_name_or_path") : "model_type");
  const bool qwen_vl = kind == Vision::kQwen2Vl || kind == Vision::kQwen25Vl || kind == Vision::kQwen3Vl;
  if (kind == Vision::kQwen2Vl) {
    // Qwen2-VL's vision_config: depth, embed_dim, num_heads, mlp_ratio.
    t.set_num_layers(r.need("depth", tp + "num_layers"));
    const int64_t width = r.need("embed_dim", tp + "hidden_size");
    t.set_hidden_size(width);
    t.set_num_attention_heads(r.need("num_heads", tp + "num_attention_heads"));
    const double ratio = c.number("mlp_ratio").value_or(4);
    t.set_ffn_hidden_size(static_cast<int64_t>(ratio * static_cast<double>(width)));
    a.from(tp + "ffn_hidden_size", c.where("mlp_ratio") + " × embed_dim");
  } else if (kind == Vision::kQwen3Vl || kind == Vision::kQwen25Vl) {
    t.set_num_layers(r.need("depth", tp + "num_layers"));
    t.set_hidden_size(r.need("hidden_size", tp + "hidden_size"));
    t.set_num_attention_heads(r.need("num_heads", tp + "num_attention_heads"));
    t.set_ffn_hidden_size(r.need("intermediate_size", tp + "ffn_hidden_size"));
  } else {
    t.set_num_layers(r.need("num_hidden_layers", tp + "num_layers"));
    t.set_hidden_size(r.need("hidden_size", tp + "hidden_size"));
    t.set_num_attention_heads(r.need("num_attention_heads", tp + "num_attention_heads"));
    t.set_ffn_hidden_size(r.need("intermediate_size", tp + "ffn_hidden_size"));
  }
  t.set_num_kv_heads(t.num_attention_heads());
  a.from(tp + "num_kv_heads", "default: num_attention_heads (vision encoders use multi-head attention)");
  // Qwen2.5-VL's vision blocks are SwiGLU + RMSNorm (hidden_act "silu");
  // every other encoder here is a GELU MLP.
  const std::string act = c.string("hidden_act").value_or("gelu");
  const bool gated = act == "silu" || act == "swish";
  t.set_activation(gated ? scenario::SWIGLU : scenario::GELU);
  a.from(tp + "activation", c.has("hidden_act") ? c.where("hidden_act") + (gated ? " (gated SiLU MLP)" : " (GELU MLP)")
                                                : "default: GELU MLP (ViT)");
  const bool rms = c.string("norm_type").value_or("") == "rms_norm" || kind == Vision::kQwen25Vl;
  t.set_norm(rms ? scenario::RMSNORM : scenario::LAYERNORM);
  a.from(tp + "norm", c.has("norm_type")             ? c.where("norm_type")
                      : kind == Vision::kQwen25Vl    ? "Qwen2.5-VL's vision RMSNorm"
                                                     : "default: LayerNorm (ViT)");
  if (kind == Vision::kQwen25Vl && c.has("window_size") && c.has("fullatt_block_indexes"))
    a.add_note(tp + "num_layers", "Qwen2.5-VL's windowed attention (window_size, full attention only in "
                                  "fullatt_block_indexes) is modelled as full attention in every layer.");
  const bool bias = c.boolean("qkv_bias").value_or(kind != Vision::kInternVit);
  if (bias) {
    t.set_linear_bias(true);
    a.from(tp + "linear_bias", c.has("qkv_bias") ? c.where("qkv_bias") : "default: biased linear layers (ViT)");
  }
  t.set_bidirectional_attention(true);
  a.from(tp + "bidirectional_attention", "vision encoders attend bidirectionally");
  t.set_position_embedding(qwen_vl ? Transformer::POSITION_ROTARY : Transformer::POSITION_LEARNED);
  a.from(tp + "position_embedding", qwen_vl ? "Qwen-VL's 2D rotary embedding" : "learned absolute positions (ViT)");

  // Tokens per image: patches (+ a class token for ViT, CLIP and InternViT).
  int64_t image = o.image_size > 0 ? o.image_size : (qwen_vl ? 448 : r.value("image_size"));
  const int64_t patch = r.value("patch_size");
  EncoderShape shape;
  if (!missing.empty()) missing_keys(c.file(), missing, "the vision encoder (" + type + ")");
  if (patch <= 0 || image < patch)
    throw Error(SourceLocation{c.file(), 0, 0, c.prefix() + "patch_size"},
                fmt::format("image size {} holds no patch of patch_size {}", image, patch),
                "pass --image-size of at least the patch size");
  // The patch embedding is a stride-`patch` convolution without padding:
  // floor(image / patch) patches per side (SigLIP 384 px at 14: 27).
  const bool class_token = kind == Vision::kVit || kind == Vision::kClip || kind == Vision::kInternVit;
  const std::optional<int64_t> patches = checked_mul(image / patch, image / patch);
  if (!patches || !checked_add(*patches, 1))
    throw Error(o.image_size > 0 ? SourceLocation{{}, 0, 0, "--image-size"} : SourceLocation{c.file(), 0, 0, c.prefix() + "image_size"},
                fmt::format("image size {} gives ({} / {})² patches per image, beyond a 64-bit count", image, image,
                            patch),
                "give the image side in pixels (e.g. 224, 336, 448)");
  const std::string image_from = o.image_size > 0 ? "--image-size"
                                 : qwen_vl        ? "default: 448 px images (dynamic resolution; --image-size)"
                                                  : c.where("image_size");
  shape.tokens = *patches + (class_token ? 1 : 0);
  a.from(tp + "seq_length", fmt::format("({} / {})² patches{} ({}; {})", image, patch, class_token ? " + class token" : "",
                                        image_from, c.where("patch_size")));
  if (qwen_vl) {
    const int64_t m = c.integer("spatial_merge_size").value_or(2);
    shape.merge = m * m;
    a.add_note(p + "projector", "Qwen-VL's patch merger (LayerNorm, Linear(4·h_enc → 4·h_enc), GELU, Linear(4·h_enc → "
                                "h_llm)) modelled as lacuna's 2-layer projector after a 2×2 token merge.");
    (void)c.has("temporal_patch_size");
    (void)c.has("out_hidden_size");
    (void)c.has("hidden_size");
  }
  t.set_seq_length(shape.tokens);
  for (const char* k : {"architectures", "model_type", "torch_dtype", "initializer_range", "initializer_factor",
                        "layer_norm_eps", "num_channels", "in_chans", "in_channels", "dropout", "attention_dropout",
                        "hidden_dropout_prob", "attention_probs_dropout_prob", "projection_dim", "transformers_version",
                        "_name_or_path", "use_flash_attn", "qk_normalization", "drop_path_rate", "encoder_stride",
                        "deepstack_visual_indexes", "num_position_embeddings", "layer_norm_type", "dtype",
                        "output_attentions", "output_hidden_states", "return_dict", "use_bfloat16",
                        "spatial_patch_size", "id2label", "label2id", "vocab_size", "tokens_per_second",
                        "window_size", "fullatt_block_indexes"})
    (void)c.has(k);
  return shape;
}

void finish_encoder(Annotated& a, int index, const EncoderShape& shape, const HfOptions& o, const std::string& merge_from) {
  auto& enc = *a.spec.mutable_model()->mutable_encoders(index);
  const std::string p = fmt::format("model.encoders[{}].", index);
  auto& proj = *enc.mutable_projector();
  proj.set_num_layers(2);
  a.from(p + "projector.num_layers", "default: LLaVA-style 2-layer MLP projector");
  if (shape.merge > 1) {
    proj.set_token_merge(shape.merge);
    a.from(p + "projector.token_merge", merge_from);
  }
  enc.set_images_per_sample(o.images_per_sample > 0 ? o.images_per_sample : 1);
  a.from(p + "images_per_sample", o.images_per_sample > 0 ? "--images-per-sample" : "default: one image per sample (--images-per-sample)");
}

// Reports the keys of `c` the importer never read.
void report_unread(const JsonConfig& c, Annotated& a) {
  const auto keys = c.unread();
  if (keys.empty()) return;
  std::string list;
  for (const auto& k : keys) list += (list.empty() ? "" : ", ") + c.prefix() + k;
  a.header.push_back("Not mapped (no effect on the simulated step, or not modelled): " + list);
}

[[noreturn]] void unknown_architecture(const JsonConfig& c, const std::string& arch, const std::string& type) {
  // The keys lacuna's transformer could take, and every other key present.
  static const std::set<std::string> generic = {"num_hidden_layers", "hidden_size",   "num_attention_heads",
                                                "num_key_value_heads", "intermediate_size", "vocab_size",
                                                "max_position_embeddings", "hidden_act", "rms_norm_eps",
                                                "layer_norm_eps", "tie_word_embeddings", "rope_theta"};
  // Keys that never change a simulated step (token ids, initialisation, file metadata).
  static const std::set<std::string> irrelevant = {"bos_token_id", "eos_token_id", "pad_token_id",
                                                   "initializer_range", "torch_dtype", "dtype",
                                                   "transformers_version", "use_cache", "_name_or_path",
                                                   "auto_map", "architectures", "model_type"};
  std::string could, could_not;
  for (const auto& key : c.keys()) {
    if (irrelevant.count(key)) continue;
    std::string& list = generic.count(key) ? could : could_not;
    list += (list.empty() ? "" : ", ") + key;
  }
  throw Error(SourceLocation{c.file(), 0, 0, "architectures"},
              fmt::format("unknown architecture \"{}\" (model_type \"{}\"); lacuna maps {}. It could map: {}; it "
                          "could not map: {}",
                          arch, type, kMapped, could.empty() ? "none" : could, could_not.empty() ? "none" : could_not),
              "write the scenario by hand (docs/scenario.md) from the fields above, or import a supported "
              "architecture of the same shape");
}

}  // namespace

Annotated import_hf(const ConfigFile& file, const HfOptions& o) {
  const JsonConfig c = JsonConfig::parse(file.text, file.path);
  const std::string arch = first_architecture(c);
  const std::string type = c.string("model_type").value_or("");
  Annotated a;
  const std::string stem = std::filesystem::path(file.path).stem().string();
  a.header.push_back(fmt::format("Imported by `lacuna import hf` from {} ({}).", file.path, arch.empty() ? type : arch));
  a.header.push_back("Each field names its source: a config.json key, an import option, or a documented default "
                     "(docs/import.md).");

  // Multimodal: a vision tower nested beside the text model.
  std::optional<JsonConfig> vision = c.object("vision_config");
  std::optional<JsonConfig> text = c.object("text_config");
  if (!text) text = c.object("llm_config");  // InternVL
  const JsonConfig& tc = text ? *text : c;
  const std::string text_arch = text ? first_architecture(*text) : arch;
  const std::string text_type = text ? text->string("model_type").value_or("") : type;
  Text family = text_family(text_arch, text_type);
  // Qwen2-VL keeps its text model at the top level beside vision_config.
  if (vision && !text && family == Text::kNone && (type == "qwen2_vl" || type == "qwen2_5_vl")) family = Text::kQwen2;
  const Vision standalone = vision ? Vision::kNone : vision_family(arch, type);
  if (family == Text::kNone && !(standalone != Vision::kNone && !o.encoders.empty()))
    unknown_architecture(tc, text_arch.empty() ? arch : text_arch, text_type);
  (void)standalone;

  a.spec.set_name(c.string("_name_or_path").value_or(stem.empty() ? "imported" : stem));
  a.from("name", c.has("_name_or_path") ? c.where("_name_or_path") : "the config file's name");
  map_llm(tc, family, text_arch, o.layout, a);

  int index = 0;
  if (vision) {
    const std::string vtype = vision->string("model_type").value_or("");
    Vision kind = vision_family(first_architecture(*vision), vtype);
    if (kind == Vision::kNone) {
      // The nested vision_config of Qwen-VL and InternVL may carry no model_type of its own.
      if (type == "qwen2_vl") kind = Vision::kQwen2Vl;
      else if (type == "qwen2_5_vl") kind = Vision::kQwen25Vl;
      else if (type == "qwen3_vl" || type == "qwen3_vl_moe") kind = Vision::kQwen3Vl;
      else if (type == "internvl_chat") kind = Vision::kInternVit;
    }
    if (kind == Vision::kNone) unknown_architecture(*vision, first_architecture(*vision), vtype);
    EncoderShape shape = map_encoder(*vision, kind, o, a, index);
    std::string merge_from = "Qwen-VL's spatial_merge_size²";
    if (auto ratio = c.number("downsample_ratio"); ratio && *ratio > 0 && *ratio < 1) {
      // InternVL's pixel shuffle drops the class token and merges 1/r² patches.
      const auto m = static_cast<int64_t>(1.0 / (*ratio * *ratio) + 0.5);
      shape.merge = m;
      shape.tokens -= 1;
      a.spec.mutable_model()->mutable_encoders(index)->mutable_transformer()->set_seq_length(shape.tokens);
      a.add_note(fmt::format("model.encoders[{}].transformer.seq_length", index),
                 "InternVL's pixel shuffle keeps the patch tokens only: the class token is not modelled.");
      merge_from = c.where("downsample_ratio") + " (pixel shuffle: 1 / ratio²)";
    }
    finish_encoder(a, index, shape, o, merge_from);
    if (auto layer = c.integer("vision_feature_layer"); layer && *layer < -1)
      a.add_note(fmt::format("model.encoders[{}].transformer.num_layers", index),
                 fmt::format("LLaVA reads layer {} (vision_feature_layer); HF still runs every layer, as modelled.", *layer));
    for (const char* k : {"projector_hidden_act", "vision_feature_select_strategy", "image_token_index",
                          "image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id",
                          "vision_token_id", "ignore_index", "image_seq_length", "select_layer", "template",
                          "ps_version", "force_image_size", "dynamic_image_size", "use_thumbnail", "max_dynamic_patch",
                          "min_dynamic_patch", "architectures", "model_type", "torch_dtype", "transformers_version",
                          "tie_word_embeddings", "rope_scaling", "_name_or_path", "use_backbone_lora", "use_llm_lora",
                          "pad2square", "downsample_ratio", "vision_feature_layer", "multimodal_projector_bias"})
      (void)c.has(k);
    report_unread(*vision, a);
    ++index;
  }
  for (const ConfigFile& ef : o.encoders) {
    const JsonConfig ec = JsonConfig::parse(ef.text, ef.path);
    const std::string earch = first_architecture(ec);
    const std::string etype = ec.string("model_type").value_or("");
    // A full CLIP / SigLIP config nests the vision tower.
    std::optional<JsonConfig> inner = ec.object("vision_config");
    const JsonConfig& vc = inner ? *inner : ec;
    Vision kind = vision_family(inner ? first_architecture(vc) : earch, vc.string("model_type").value_or(etype));
    if (kind == Vision::kNone && inner) kind = etype == "siglip" ? Vision::kSiglip : etype == "clip" ? Vision::kClip : kind;
    if (kind == Vision::kNone) unknown_architecture(vc, earch, etype);
    const EncoderShape shape = map_encoder(vc, kind, o, a, index);
    finish_encoder(a, index, shape, o, "");
    report_unread(vc, a);
    ++index;
  }
  if (index > 0) {
    a.spec.mutable_placement()->set_kind(scenario::MEGATRON_BASELINE);
    a.from("placement.kind", "default: encoders in the LLM's first pipeline stage (Megatron-LM's layout)");
  }
  report_unread(tc, a);
  if (text) report_unread(c, a);

  a.spec.mutable_training()->set_precision(scenario::BF16);
  a.from("training.precision", "default: BF16 (mixed precision with BF16 compute)");
  apply_layout(o.layout, a);
  return a;
}

}  // namespace lacuna::importer
