// Rules of the multimodal fields: encoders (their transformer, projector and
// data mix), encoder layouts and rank sets, and the placement. Runs after the
// section passes (so the LLM's sizes, the plan's factors, the batch and the
// cluster size are each in range) and before validate_consistency, which can
// then rely on a validated encoder island when it sizes the LLM's world.
// docs/scenario.md ("Multimodal models") lists the rules with their reasons.
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "sim/scenario/checks.h"
#include "sim/scenario/encoder_pipeline.h"
#include "sim/scenario/scenario_internal.h"

namespace lacuna::scenario {

namespace {

using internal::s;

std::string ranks(int64_t first, int64_t world) { return "[" + s(first) + ", " + s(first + world) + ")"; }

std::string divisors_of(int64_t n, int max_shown = 8) {
  std::string out;
  int shown = 0;
  for (int64_t d = 1; d <= n && shown < max_shown; ++d)
    if (n % d == 0) out += (shown++ ? ", " : "") + s(d);
  return out;
}

std::string enc_path(int e) { return "model.encoders[" + s(e) + "]"; }

// "encoder 0 (vit-22b)" for messages.
std::string enc_name(const Scenario& spec, int e) {
  const auto& name = spec.model().encoders(e).transformer().name();
  return "encoder " + s(e) + (name.empty() ? "" : " (" + name + ")");
}

int64_t token_merge(const Encoder& enc) { return enc.projector().token_merge() > 0 ? enc.projector().token_merge() : 1; }
int64_t kv_heads(const Transformer& t) { return t.num_kv_heads() > 0 ? t.num_kv_heads() : t.num_attention_heads(); }

// Images per sample of a validated data mix (the formula of
// model::images_per_sample; the scenario library cannot depend on sim/model).
int64_t images(const Scenario& spec, const Encoder& enc) {
  if (enc.images_per_sample() > 0) return enc.images_per_sample();
  return std::llround(enc.vision_token_share() * static_cast<double>(spec.model().llm().seq_length()) *
                      static_cast<double>(token_merge(enc)) / static_cast<double>(enc.transformer().seq_length()));
}
int64_t vision_tokens(const Scenario& spec, const Encoder& enc) {
  return images(spec, enc) * enc.transformer().seq_length() / token_merge(enc);
}

// The path of the field that sets the data mix (for errors about it).
std::string data_mix_path(const Encoder& enc, int e) {
  return enc_path(e) + (enc.images_per_sample() > 0 ? ".images_per_sample" : ".vision_token_share");
}

__int128 world(const ModuleLayout& l) { return static_cast<__int128>(l.tp()) * l.cp() * l.pp() * l.dp(); }
__int128 llm_world(const Scenario& spec) {
  const auto& p = spec.parallel();
  return static_cast<__int128>(p.tp()) * p.cp() * p.pp() * p.dp();
}

bool same_layout(const ModuleLayout& a, const ModuleLayout& b) {
  return a.tp() == b.tp() && a.cp() == b.cp() && a.pp() == b.pp() && a.dp() == b.dp() &&
         a.first_rank() == b.first_rank() && a.virtual_stages() == b.virtual_stages() &&
         a.sequence_parallel() == b.sequence_parallel();
}

// ---------------------------------------------------------------- encoder

void check_transformer(const Scenario& spec, const Checker& c, int e) {
  const auto& enc = spec.model().encoders(e);
  if (!enc.has_transformer())
    c.fail(enc_path(e) + ".transformer", enc_name(spec, e) + " has no transformer",
           "add transformer { num_layers: ... hidden_size: ... num_attention_heads: ... ffn_hidden_size: ... "
           "seq_length: <tokens per image> bidirectional_attention: true }");
  const auto& t = enc.transformer();
  const std::string p = enc_path(e) + ".transformer.";
  c.count(p + "num_layers", t.num_layers(), Limits::kLayers);
  c.count(p + "hidden_size", t.hidden_size(), Limits::kHidden);
  c.count(p + "num_attention_heads", t.num_attention_heads(), Limits::kHeads);
  c.count(p + "ffn_hidden_size", t.ffn_hidden_size(), Limits::kFfn);
  c.count(p + "seq_length", t.seq_length(), Limits::kSeq,
          "set seq_length to the tokens per image (patches, plus a class token if any), e.g. 1024 for 448 px "
          "at patch 14");
  // 0 kv heads means plain multi-head attention (as model::encoder_layer_shape
  // reads it); negative is a typo.
  if (t.num_kv_heads() < 0 || t.num_kv_heads() > Limits::kHeads)
    c.fail(p + "num_kv_heads", "must be ≥ 0 (0: equal to num_attention_heads), got " + s(t.num_kv_heads()),
           "omit it for multi-head attention, or set a divisor of num_attention_heads");
  // Unset activation / norm mean GELU / LayerNorm, ViT's; any set value must
  // be a known one.
  if (t.activation() != ACTIVATION_UNSPECIFIED) c.enumeration(p + "activation", t.activation());
  if (t.norm() != NORM_UNSPECIFIED) c.enumeration(p + "norm", t.norm());
  c.enumeration(p + "attention_kernel", t.attention_kernel());
  for (const auto& [name, value] : {std::pair<const char*, double>{"hidden_dropout", t.hidden_dropout()},
                                    std::pair<const char*, double>{"attention_dropout", t.attention_dropout()}}) {
    if (!std::isfinite(value) || value < 0 || value >= 1)
      c.fail(p + name, std::string(name) + " must be a probability in [0, 1), got " + Checker::fmt(value),
             "use 0 for no dropout");
  }
  if (t.hidden_size() % t.num_attention_heads() != 0)
    c.fail(p + "num_attention_heads",
           "num_attention_heads " + s(t.num_attention_heads()) + " must divide hidden_size " + s(t.hidden_size()),
           "choose heads so that hidden_size / heads is the head dimension (e.g. 64 or 128)");
  if (t.num_attention_heads() % kv_heads(t) != 0)
    c.fail(p + "num_kv_heads",
           "num_kv_heads " + s(kv_heads(t)) + " must divide num_attention_heads " + s(t.num_attention_heads()),
           "use a divisor of " + s(t.num_attention_heads()) + " (" + divisors_of(t.num_attention_heads()) + ", ...)");
  if (!t.bidirectional_attention())
    c.fail(p + "bidirectional_attention",
           "encoders attend bidirectionally, but " + enc_name(spec, e) + " has bidirectional_attention false",
           "set bidirectional_attention: true");
}

// The data mix and the projector; returns the LLM positions the encoder fills
// per sample.
int64_t check_data_mix(const Scenario& spec, const Checker& c, int e) {
  const auto& enc = spec.model().encoders(e);
  const std::string p = enc_path(e);
  const int64_t tokens = enc.transformer().seq_length();
  const int64_t seq = spec.model().llm().seq_length();

  const auto& proj = enc.projector();
  if (proj.token_merge() < 0 || proj.token_merge() > tokens)
    c.fail(p + ".projector.token_merge",
           "token_merge must be between 1 and the tokens per image (" + s(tokens) + "), got " + s(proj.token_merge()),
           "use 1 (or omit it) for no merge, 4 for a 2 × 2 pixel shuffle");
  const int64_t merge = token_merge(enc);
  if (tokens % merge != 0)
    c.fail(p + ".projector.token_merge",
           "token_merge " + s(merge) + " must divide the " + s(tokens) + " tokens per image (transformer.seq_length)",
           "choose a divisor of " + s(tokens) + " (" + divisors_of(tokens) + ", ...)");
  if (proj.num_layers() < 0 || proj.num_layers() > 2)
    c.fail(p + ".projector.num_layers", "the projector has 1 or 2 linear layers, got " + s(proj.num_layers()),
           "use 2 (LLaVA-1.5's MLP; also what 0 means) or 1 (a single linear layer)");

  const int64_t given = enc.images_per_sample();
  const double share = enc.vision_token_share();
  if (given < 0)
    c.fail(p + ".images_per_sample", "must be ≥ 1 (or unset to use vision_token_share), got " + s(given),
           "set the images each sample carries, e.g. images_per_sample: 4");
  if (!std::isfinite(share) || share < 0 || share > 1)
    c.fail(p + ".vision_token_share",
           "must be in (0, 1] (the share of the LLM sequence this encoder's tokens take), got " + Checker::fmt(share),
           "use e.g. 0.5 for half of the sequence");
  if (given > 0 && share > 0)
    c.fail(p + ".vision_token_share",
           "both images_per_sample (" + s(given) + ") and vision_token_share (" + Checker::fmt(share) +
               ") are set; the data mix takes one of them",
           "keep one: images_per_sample for a fixed image count, vision_token_share to derive it from the LLM "
           "sequence");
  if (given == 0 && share == 0)
    c.fail(p, enc_name(spec, e) + " sets neither images_per_sample nor vision_token_share",
           "set images_per_sample: N, or vision_token_share: s with s in (0, 1]");
  if (given > 0) {
    c.count(p + ".images_per_sample", given, seq);  // more images than positions cannot fit anyway
  } else {
    // images = share × seq × merge / tokens per image, which must be whole.
    const double exact = share * static_cast<double>(seq) * static_cast<double>(merge) / static_cast<double>(tokens);
    const double whole = std::round(exact);
    if (whole < 1 || std::abs(exact - whole) > 1e-9 * std::max(1.0, exact)) {
      // The shares on either side that do give whole image counts.
      const double step = static_cast<double>(tokens) / (static_cast<double>(seq) * static_cast<double>(merge));
      const double lo = std::floor(exact), hi = lo + 1;
      auto count = [](double k) { return Checker::fmt(k) + (k == 1 ? " image" : " images"); };
      std::string options;
      for (double k : {lo, hi})
        if (k >= 1 && k * step <= 1) options += (options.empty() ? "" : " or ") + Checker::fmt(k * step) + " (" + count(k) + ")";
      const std::string fix = options.empty() ? "one image takes more than the whole LLM sequence: raise token_merge "
                                                "or model.llm.seq_length"
                                              : "use a share giving whole images: " + options +
                                                    ", or set images_per_sample";
      c.fail(p + ".vision_token_share",
             "vision_token_share " + Checker::fmt(share) + " gives " + Checker::fmt(share) + " × " + s(seq) +
                 " (llm seq_length) × " + s(merge) + " (token_merge) / " + s(tokens) + " (tokens per image) = " +
                 Checker::fmt(exact) + " images per sample, not a whole number ≥ 1",
             fix);
    }
  }
  return vision_tokens(spec, enc);
}

// TP / CP / SP of one encoder (and its projector) against its sizes. `tp_path`
// is where a TP problem is reported; `how` says where the split comes from.
struct Split {
  int64_t tp = 1, cp = 1;
  bool sp = false;
  std::string tp_path, cp_path, sp_path, how;
};

void check_split(const Scenario& spec, const Checker& c, int e, const Split& sp) {
  const auto& enc = spec.model().encoders(e);
  const auto& t = enc.transformer();
  const std::string who = enc_name(spec, e);
  const std::string tp = "tp=" + s(sp.tp);
  auto need_tp = [&](int64_t n, const std::string& what) {
    if (n % sp.tp != 0)
      c.fail(sp.tp_path, tp + " " + sp.how + " must divide " + who + "'s " + what + " (" + s(n) + ")",
             "choose a tp among the divisors of " + s(n) + " (" + divisors_of(n) + ", ...), or change the "
             "encoder's " + what);
  };
  need_tp(t.num_attention_heads(), "attention heads");
  need_tp(kv_heads(t), "kv heads");
  need_tp(t.ffn_hidden_size(), "ffn_hidden_size");
  if (spec.model().llm().hidden_size() % sp.tp != 0)
    c.fail(sp.tp_path,
           tp + " " + sp.how + " must divide model.llm.hidden_size (" + s(spec.model().llm().hidden_size()) +
               "): the projector's linears are split over the encoder's TP",
           "choose a tp dividing " + s(spec.model().llm().hidden_size()));
  const int64_t tokens = t.seq_length(), merge = token_merge(enc);
  if (sp.cp > 1 && (tokens % sp.cp != 0 || (tokens / merge) % sp.cp != 0))
    c.fail(sp.cp_path,
           "cp=" + s(sp.cp) + " " + sp.how + " must divide the " + s(tokens) + " tokens per image and the " +
               s(tokens / merge) + " LLM tokens each image becomes after the merge",
           "use cp: 1 (an image's sequence is short; the heterogeneous-parallelism paper keeps encoder CP at 1)");
  if (sp.sp) {
    if (sp.tp == 1)
      c.fail(sp.sp_path, "sequence_parallel needs tp > 1", "set sequence_parallel: false, or tp ≥ 2");
    const int64_t mb = spec.training().micro_batch();
    const __int128 enc_tokens = static_cast<__int128>(mb) * images(spec, enc) * tokens / sp.cp;
    const __int128 llm_tokens = static_cast<__int128>(mb) * vision_tokens(spec, enc) / sp.cp;
    if (enc_tokens % sp.tp != 0 || llm_tokens % sp.tp != 0)
      c.fail(sp.sp_path,
             "sequence parallelism splits " + who + "'s tokens of a microbatch over " + tp +
                 ", which divides neither the encoder tokens (micro_batch × images × tokens per image / cp) nor "
                 "the projector's output tokens evenly",
             "choose images per sample, token_merge and tp so that both are multiples of tp, or set "
             "sequence_parallel: false");
  }
}

void check_module_rank_order(const std::string& order, const std::string& path, const Checker& c) {
  if (order.empty()) return;
  std::vector<std::string> parts;
  std::string cur;
  for (char ch : order + "-") {
    if (ch != '-') {
      cur += ch;
      continue;
    }
    parts.push_back(cur);
    cur.clear();
  }
  std::sort(parts.begin(), parts.end());
  if (parts != std::vector<std::string>{"cp", "dp", "pp", "tp"})
    c.fail(path, "\"" + order + "\" must name each of tp, cp, dp and pp once, joined by \"-\"",
           "write e.g. \"tp-cp-dp-pp\" (also used when rank_order is empty)");
}

// Field ranges of an encoder's own layout and its split.
void check_layout(const Scenario& spec, const Checker& c, int e) {
  const auto& enc = spec.model().encoders(e);
  const auto& l = enc.layout();
  const std::string p = enc_path(e) + ".layout.";
  for (const auto& [name, v] : {std::pair<const char*, int64_t>{"tp", l.tp()}, {"cp", l.cp()}, {"pp", l.pp()},
                                {"dp", l.dp()}}) {
    if (v == 0)
      c.fail(p + name, std::string(name) + " must be set: an encoder layout needs each of tp, cp, pp and dp ≥ 1",
             std::string("set ") + name + ": 1 or more");
    c.count(p + name, v, Limits::kGpus);
  }
  if (l.virtual_stages() < 0 || l.virtual_stages() > Limits::kVirtualStages)
    c.fail(p + "virtual_stages", "must be 0 (one chunk) or a chunk count ≥ 1, got " + s(l.virtual_stages()),
           "omit it, or set the model chunks per encoder pipeline rank");
  const int64_t chunks = std::max<int64_t>(1, l.virtual_stages());
  if (chunks > 1 && l.pp() < 2)
    c.fail(p + "virtual_stages", "virtual_stages " + s(chunks) + " needs pp ≥ 2 (pp is " + s(l.pp()) + ")",
           "set virtual_stages: 1, or pp ≥ 2");
  if (l.first_rank() < 0 || l.first_rank() > Limits::kGpus)
    c.fail(p + "first_rank", "must be a rank ≥ 0, got " + s(l.first_rank()),
           "use 0 to colocate with the LLM, or the LLM's world size for an encoder island");
  c.enumeration(p + "recompute", l.recompute());
  check_module_rank_order(l.rank_order(), p + "rank_order", c);
  const int64_t layers = enc.transformer().num_layers();
  if (layers < l.pp() * chunks)
    c.fail(p + "pp",
           enc_name(spec, e) + " has " + s(layers) + " layers, fewer than its " + s(l.pp() * chunks) +
               " pipeline stages (pp × virtual_stages)",
           "use pp × virtual_stages ≤ " + s(layers));
  check_split(spec, c, e,
              {l.tp(), l.cp(), l.sequence_parallel(), p + "tp", p + "cp", p + "sequence_parallel", "(encoder layout)"});
}

// ---------------------------------------------------------------- placement

std::string placement_kinds() {
  return "MEGATRON_BASELINE, MEGATRON_BALANCED, OPTIMUS, HETEROGENEOUS, MEGATRON_ENCODER_PP, MEGATRON_LAYER_SPLIT";
}

void check_placement_fields(const Scenario& spec, const Checker& c) {
  const auto& pl = spec.placement();
  if (pl.kind() == PLACEMENT_UNSPECIFIED)
    c.fail("placement.kind", "placement.kind is required for a multimodal model: " + placement_kinds(),
           "add placement { kind: ... }: MEGATRON_BASELINE (encoders in the LLM's first stage), MEGATRON_BALANCED "
           "(encoder + LLM layers balanced over interleaved stages), OPTIMUS (encoder in the LLM's bubbles) or "
           "HETEROGENEOUS (encoder layouts of their own)");
  c.enumeration("placement.kind", pl.kind());
  if (pl.balanced_virtual_stages() < 0 || pl.balanced_virtual_stages() > Limits::kVirtualStages)
    c.fail("placement.balanced_virtual_stages",
           "must be ≥ 0 (0: parallel.virtual_stages), got " + s(pl.balanced_virtual_stages()),
           "omit it, or set the model chunks per pipeline rank of the balanced baseline");
  if (pl.optimus().max_splits_per_plan() < 0 || pl.optimus().max_splits_per_plan() > int64_t{1'000'000'000})
    c.fail("placement.optimus.max_splits_per_plan",
           "must be ≥ 0 (0: 4096) and at most 10^9, got " + s(pl.optimus().max_splits_per_plan()),
           "omit it for the default cap of 4096");
  c.real("placement.heterogeneous.host_link_gb_per_s", pl.heterogeneous().host_link_gb_per_s(), 1e6, true);
}

// MEGATRON_BASELINE / MEGATRON_BALANCED: the encoders run in the LLM's layout.
void check_megatron(const Scenario& spec, const Checker& c) {
  const auto kind = spec.placement().kind();
  const auto& par = spec.parallel();
  int64_t encoder_layers = 0;
  for (int e = 0; e < spec.model().encoders_size(); ++e) {
    const auto& enc = spec.model().encoders(e);
    if (enc.has_layout())
      c.fail(enc_path(e) + ".layout",
             PlacementKind_Name(kind) + " runs every encoder in the LLM's layout (TP of the LLM, first pipeline "
                                        "stage or the balanced layer chain); this layout would be ignored",
             "remove the layout, or use placement OPTIMUS or HETEROGENEOUS to give the encoder a layout of its "
             "own");
    check_split(spec, c, e,
                {par.tp(), par.cp() > 0 ? par.cp() : 1, par.sequence_parallel() && par.tp() > 1, "parallel.tp", "parallel.cp",
                 "parallel.sequence_parallel", "(the LLM's, which " + PlacementKind_Name(kind) + " gives the encoders)"});
    encoder_layers += enc.transformer().num_layers();
  }
  if (kind != MEGATRON_BALANCED && kind != MEGATRON_LAYER_SPLIT) return;
  const int64_t v = kind == MEGATRON_BALANCED && spec.placement().balanced_virtual_stages() > 0
                        ? spec.placement().balanced_virtual_stages()
                        : std::max<int64_t>(1, par.virtual_stages());
  const int64_t chain = encoder_layers + spec.model().llm().num_layers();
  if (chain < par.pp() * v)
    c.fail(kind == MEGATRON_BALANCED && spec.placement().balanced_virtual_stages() > 0
               ? "placement.balanced_virtual_stages"
               : "parallel.virtual_stages",
           "the encoder + LLM chain has " + s(chain) + " layers, fewer than pp × virtual stages = " + s(par.pp()) +
               " × " + s(v),
           "use fewer balanced virtual stages (at most " + s(chain / par.pp()) + ")");
}

// MEGATRON_ENCODER_PP: one encoder on stages of its own, sharing the LLM's
// dp and cp; the rest (tp ≤ the LLM's, heads, layers, room) is checked where
// the placement is built (placement::encoder_pp_scenario), which compare
// reaches without validating the placement.
void check_encoder_pp(const Scenario& spec, const Checker& c) {
  if (spec.model().encoders_size() != 1)
    c.fail("model.encoders",
           "MEGATRON_ENCODER_PP is Megatron-LM's encoder pipeline, which holds one encoder (LLaVA's vision model); "
           "the model has " + s(spec.model().encoders_size()),
           "use HETEROGENEOUS (an island per encoder), or one encoder");
  const auto& enc = spec.model().encoders(0);
  if (!enc.has_layout()) return;
  const auto& l = enc.layout();
  const auto& par = spec.parallel();
  if (l.dp() != par.dp())
    c.fail(enc_path(0) + ".layout.dp",
           "Megatron's encoder ranks share the LLM's data parallelism (world = dp · (encoder tp·pp·cp + "
           "tp·pp·cp)); layout.dp is " + s(l.dp()) + ", the LLM's dp " + s(par.dp()),
           "set dp: " + s(par.dp()));
  if (l.cp() != std::max<int64_t>(1, par.cp()))
    c.fail(enc_path(0) + ".layout.cp",
           "Megatron's encoder and LLM share one context-parallel size; layout.cp is " + s(l.cp()) +
               ", the LLM's cp " + s(par.cp()),
           "set cp: " + s(std::max<int64_t>(1, par.cp())));
}

void check_optimus(const Scenario& spec, const Checker& c) {
  const auto& par = spec.parallel();
  if (par.cp() != 1)
    c.fail("parallel.cp",
           "OPTIMUS plans the encoder over (DP, PP, TP) of the LLM's GPUs and has no context parallelism; "
           "parallel.cp is " + s(par.cp()),
           "set parallel.cp: 1 (raise dp instead), or use placement HETEROGENEOUS");
  const int n = spec.model().encoders_size();
  int with_layout = 0;
  for (int e = 0; e < n; ++e) with_layout += spec.model().encoders(e).has_layout() ? 1 : 0;
  if (with_layout == 0) return;  // the planner chooses the encoder plan
  for (int e = 0; e < n; ++e) {
    const auto& enc = spec.model().encoders(e);
    if (!enc.has_layout() || !same_layout(enc.layout(), spec.model().encoders(0).layout()))
      c.fail(enc.has_layout() ? enc_path(e) + ".layout" : enc_path(e),
             "Optimus schedules multi-branch encoders as one: they share one (DP, PP, TP) plan, but " +
                 enc_name(spec, e) + (enc.has_layout() ? "'s layout differs from encoder 0's" : " has no layout"),
             "give every encoder the same layout, or none (the planner then chooses)");
  }
  const auto& l = spec.model().encoders(0).layout();
  const std::string p = enc_path(0) + ".layout.";
  if (l.cp() != 1)
    c.fail(p + "cp", "Optimus encoder plans have no context parallelism; encoder cp is " + s(l.cp()), "set cp: 1");
  if (par.tp() % l.tp() != 0)
    c.fail(p + "tp",
           "encoder tp=" + s(l.tp()) + " must divide llm tp=" + s(par.tp()) + " for Optimus colocation",
           "use a tp among " + divisors_of(par.tp()));
  if (par.pp() % l.pp() != 0)
    c.fail(p + "pp",
           "encoder pp=" + s(l.pp()) + " must divide llm pp=" + s(par.pp()) + " for Optimus colocation",
           "use a pp among " + divisors_of(par.pp()));
  const __int128 w = llm_world(spec), we = world(l);
  if (we != w || l.first_rank() != 0) {
    const int64_t llm = static_cast<int64_t>(std::min<__int128>(w, Limits::kGpus));
    const int64_t other = l.tp() * l.pp();
    std::string fix = "Optimus puts encoder and LLM state on every GPU: use first_rank: 0 and tp·pp·dp = " + s(llm);
    if (llm % other == 0) fix += " (dp: " + s(llm / other) + ")";
    c.fail(we != w ? p + "dp" : p + "first_rank",
           "encoder ranks " + ranks(l.first_rank(), static_cast<int64_t>(std::min<__int128>(we, Limits::kGpus))) +
               " must be the LLM's ranks " + ranks(0, llm) + " for Optimus colocation",
           fix);
  }
}

void check_heterogeneous(const Scenario& spec, const Checker& c) {
  const auto& par = spec.parallel();
  const int n = spec.model().encoders_size();
  for (int e = 0; e < n; ++e)
    if (!spec.model().encoders(e).has_layout())
      c.fail(enc_path(e),
             "HETEROGENEOUS gives every module a layout of its own, but " + enc_name(spec, e) + " has none",
             "add layout { tp: 1 cp: 1 pp: 1 dp: <LLM world / tp> first_rank: 0 } to colocate it with the LLM, or "
             "first_rank: <LLM world> for an encoder island");
  const int64_t gpus = num_gpus(spec);
  const __int128 w128 = llm_world(spec);
  if (w128 > gpus)
    c.fail("parallel.dp",
           "the LLM's tp×cp×pp×dp = " + s(static_cast<int64_t>(std::min<__int128>(w128, Limits::kGpus * int64_t{1000}))) +
               " ranks do not fit the cluster's " + s(gpus) + " GPUs",
           "lower dp, or add nodes");
  const int64_t w = static_cast<int64_t>(w128);
  int first_colocated = -1, first_island = -1;
  for (int e = 0; e < n; ++e) {
    const auto& l = spec.model().encoders(e).layout();
    const std::string p = enc_path(e) + ".layout";
    const __int128 we128 = world(l);
    if (l.first_rank() + we128 > gpus)
      c.fail(p + ".dp",
             enc_name(spec, e) + "'s ranks " + ranks(l.first_rank(), static_cast<int64_t>(std::min<__int128>(we128, Limits::kGpus))) +
                 " (first_rank + tp·cp·pp·dp) do not fit the cluster's " + s(gpus) + " GPUs",
             "lower the layout's dp, or add nodes (cluster.num_nodes)");
    const int64_t we = static_cast<int64_t>(we128);
    const bool colocated = l.first_rank() == 0 && we == w;
    const bool island = l.first_rank() >= w;
    if (!colocated && !island)
      c.fail(l.first_rank() == 0 ? p + ".dp" : p + ".first_rank",
             enc_name(spec, e) + "'s ranks " + ranks(l.first_rank(), we) + " partially overlap the LLM's ranks " +
                 ranks(0, w) + "; an encoder either shares all of the LLM's ranks or none",
             "colocate it (first_rank: 0 and tp·cp·pp·dp = " + s(w) + ") or move it to an island (first_rank ≥ " +
                 s(w) + ")");
    int& first = colocated ? first_colocated : first_island;
    if (first < 0) first = e;
    if (first_colocated >= 0 && first_island >= 0)
      c.fail(p,
             enc_name(spec, first_colocated) + " is colocated with the LLM but " + enc_name(spec, first_island) +
                 " sits on an island: encoders are either all colocated with the LLM or all share one island "
                 "layout",
             "give every encoder the same kind of placement");
    if (island && e != first_island && !same_layout(l, spec.model().encoders(first_island).layout()))
      c.fail(p,
             enc_name(spec, e) + "'s island layout differs from " + enc_name(spec, first_island) +
                 "'s: non-colocated encoders share one island layout (same tp, cp, pp, dp, virtual_stages, "
                 "sequence_parallel and first_rank)",
             "copy " + enc_path(first_island) + ".layout");
    // Batch shards cross the boundary 1:1, fanned in or fanned out.
    const int64_t dp_enc = l.dp(), dp_llm = par.dp();
    if (dp_enc % dp_llm != 0 && dp_llm % dp_enc != 0)
      c.fail(p + ".dp",
             "encoder dp=" + s(dp_enc) + " and LLM dp=" + s(dp_llm) +
                 ": one must divide the other (the boundary fans batch shards in or out, never splits them "
                 "unevenly)",
             "use an encoder dp that is a multiple or a divisor of " + s(dp_llm));
    if (spec.training().global_batch() % dp_enc != 0)
      c.fail(p + ".dp",
             "global_batch " + s(spec.training().global_batch()) + " does not split evenly over encoder dp=" +
                 s(dp_enc) + " (samples per encoder replica must be whole)",
             "use an encoder dp dividing " + s(spec.training().global_batch()) + ", or change training.global_batch");
  }
  if (first_island >= 0) {
    // Every GPU belongs to a module, as tp·cp·pp·dp = GPUs demands of an LLM
    // alone: the LLM on [0, W), the island right after it up to the end.
    const auto& l = spec.model().encoders(first_island).layout();
    const std::string p = enc_path(first_island) + ".layout";
    if (l.first_rank() > w)
      c.fail(p + ".first_rank",
             "ranks " + ranks(w, l.first_rank() - w) + " between the LLM's " + ranks(0, w) + " and the island " +
                 ranks(l.first_rank(), static_cast<int64_t>(world(l))) + " are used by no module",
             "set first_rank: " + s(w));
    const int64_t end = l.first_rank() + static_cast<int64_t>(world(l));
    if (end < gpus)
      c.fail(p + ".dp",
             "ranks " + ranks(end, gpus - end) + " of the cluster's " + s(gpus) +
                 " GPUs are used by no module (LLM " + ranks(0, w) + ", encoder island " +
                 ranks(l.first_rank(), end - l.first_rank()) + ")",
             "grow the island (dp) to end at rank " + s(gpus) + ", or use fewer nodes");
  }
  if (first_island >= 0 && spec.placement().heterogeneous().offload_encoder())
    c.fail("placement.heterogeneous.offload_encoder",
           "offload_encoder moves a colocated encoder's state to host memory during the LLM phase; the encoders "
           "here sit on an island of their own",
           "set offload_encoder: false, or colocate the encoders");
}

}  // namespace

bool has_encoder_island(const Scenario& spec) {
  if (spec.placement().kind() != HETEROGENEOUS) return false;
  for (const auto& enc : spec.model().encoders())
    if (enc.has_layout() && enc.layout().first_rank() > 0) return true;
  return false;
}

int64_t encoder_island_gpus(const Scenario& spec) {
  if (spec.placement().kind() == MEGATRON_ENCODER_PP && spec.model().encoders_size() == 1) {
    const EncoderPipelineDims d = megatron_encoder_pp_dims(spec);
    const __int128 w = static_cast<__int128>(d.tp) * d.pp * d.cp * d.dp;
    return static_cast<int64_t>(std::min<__int128>(w, Limits::kGpus));
  }
  if (!has_encoder_island(spec)) return 0;
  for (const auto& enc : spec.model().encoders())
    if (enc.has_layout() && enc.layout().first_rank() > 0) return num_gpus(spec) - enc.layout().first_rank();
  return 0;
}

void validate_multimodal(const Scenario& spec, const Checker& c) {
  const int n = spec.model().encoders_size();
  if (n == 0) {
    if (spec.placement().kind() != PLACEMENT_UNSPECIFIED)
      c.fail("placement.kind",
             "placement.kind is " + PlacementKind_Name(spec.placement().kind()) +
                 " but the model has no encoders (placement applies to multimodal models)",
             "remove the placement section, or add model.encoders");
    return;
  }
  check_placement_fields(spec, c);
  int64_t total = 0;
  for (int e = 0; e < n; ++e) {
    check_transformer(spec, c, e);
    const int64_t tokens = check_data_mix(spec, c, e);
    const auto& enc = spec.model().encoders(e);
    const int64_t seq = spec.model().llm().seq_length();
    total += tokens;  // each ≤ seq (checked below before the next one adds), so no overflow
    if (total > seq) {
      std::string parts;
      for (int k = 0; k <= e; ++k)
        parts += (k ? ", " : "") + enc_name(spec, k) + ": " + s(vision_tokens(spec, spec.model().encoders(k)));
      c.fail(data_mix_path(enc, e),
             "the encoders fill " + s(total) + " LLM positions per sample (" + parts +
                 ") but model.llm.seq_length is " + s(seq),
             "use fewer images per sample, a smaller vision_token_share or a larger token_merge, so that the "
             "vision tokens fit the sequence");
    }
    const __int128 elements = static_cast<__int128>(spec.training().micro_batch()) * images(spec, enc) *
                              enc.transformer().seq_length() * enc.transformer().hidden_size();
    if (elements > Limits::kActivationElements)
      c.fail(data_mix_path(enc, e),
             "one microbatch's encoder activations (micro_batch × images × tokens per image × hidden_size) exceed "
             "2^50 elements",
             "reduce micro_batch or the images per sample");
  }
  for (int e = 0; e < n; ++e)
    if (spec.model().encoders(e).has_layout()) check_layout(spec, c, e);
  switch (spec.placement().kind()) {
    case MEGATRON_BASELINE:
    case MEGATRON_BALANCED:
    case MEGATRON_LAYER_SPLIT: check_megatron(spec, c); break;
    case MEGATRON_ENCODER_PP: check_encoder_pp(spec, c); break;
    case OPTIMUS: check_optimus(spec, c); break;
    case HETEROGENEOUS: check_heterogeneous(spec, c); break;
    default: break;  // rejected by check_placement_fields
  }
}

}  // namespace lacuna::scenario
