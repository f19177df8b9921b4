// The field decisions of --scale-down (docs/scenario.md#scale-down):
//
// Divided by N:
// - hidden_size, ffn_hidden_size (LLM and every encoder): GEMM FLOPs per token
//   shrink ~N², weights and activations with them.
// - model.llm.seq_length: tokens per sample; attention FLOPs per token shrink
//   ~N² (s·h), activations per microbatch ~N².
// - model.encoders[i].transformer.seq_length (the tokens per image): it and
//   the LLM sequence shrink together, so the multimodal token arithmetic keeps
//   its proportions: with images_per_sample, images × tokens / token_merge
//   shrinks by N exactly like the LLM sequence it fills; with
//   vision_token_share, images = share × seq × merge / tokens is unchanged.
//
// Kept:
// - num_attention_heads, num_kv_heads: the head dimension shrinks instead, so
//   every TP / GQA divisibility of the plan still holds.
// - num_layers, vocab_size, projector.token_merge and num_layers,
//   images_per_sample, vision_token_share: counts, not sizes (the merge must
//   still divide the scaled tokens per image, checked here).
// - batch sizes, the parallel plan (ddp_bucket_size too: it counts
//   parameters and is a tuning knob, not a model size), schedule, placement,
//   cluster: the program keeps its ranks, groups and schedule, only its
//   tensors shrink.
#include "sim/scenario/scale_down.h"

#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/core/option_text.h"
#include "sim/scenario/scenario_internal.h"

namespace lacuna::scenario {

namespace {

using internal::s;

// One transformer of the scenario, with the path its fields are reported at
// and the tokens per LLM token its output is merged by (1 for the LLM).
struct Stack {
  std::string prefix;  // "model.llm." or "model.encoders[0].transformer."
  const Transformer* t;
  int64_t token_merge;
};

std::vector<Stack> stacks(const Scenario& spec) {
  std::vector<Stack> out{{"model.llm.", &spec.model().llm(), 1}};
  for (int e = 0; e < spec.model().encoders_size(); ++e) {
    const auto& enc = spec.model().encoders(e);
    const int64_t merge = enc.projector().token_merge() > 0 ? enc.projector().token_merge() : 1;
    out.push_back({"model.encoders[" + s(e) + "].transformer.", &enc.transformer(), merge});
  }
  return out;
}

struct Problem {
  std::string path;
  std::string what;
};

// The first field that `factor` cannot scale, in stack order (LLM first).
std::optional<Problem> check(const Scenario& spec, int64_t factor) {
  for (const Stack& st : stacks(spec)) {
    const Transformer& t = *st.t;
    for (const auto& [name, value] : {std::pair<const char*, int64_t>{"hidden_size", t.hidden_size()},
                                      {"ffn_hidden_size", t.ffn_hidden_size()},
                                      {"seq_length", t.seq_length()}}) {
      if (value < 1) return Problem{st.prefix + name, std::string(name) + " is " + s(value) + "; only positive sizes scale"};
      if (value % factor != 0)
        return Problem{st.prefix + name, std::string(name) + " " + s(value) + " is not divisible by " + s(factor)};
    }
    // Heads are kept, so the head dimension is what shrinks; it must stay whole.
    const int64_t heads = t.num_attention_heads();
    if (heads > 0 && (t.hidden_size() / factor) % heads != 0)
      return Problem{st.prefix + "hidden_size",
                     "hidden_size " + s(t.hidden_size()) + " / " + s(factor) + " = " + s(t.hidden_size() / factor) +
                         " is not divisible by the " + s(heads) +
                         " attention heads (scale-down keeps the heads and shrinks the head dimension)"};
    // The projector merges token_merge encoder tokens into one LLM token.
    if ((t.seq_length() / factor) % st.token_merge != 0)
      return Problem{st.prefix + "seq_length",
                     "the " + s(t.seq_length()) + " tokens per image / " + s(factor) + " = " +
                         s(t.seq_length() / factor) + " are not divisible by projector.token_merge " +
                         s(st.token_merge)};
  }
  return std::nullopt;
}

// Divides without checking (check() passed).
void apply(Scenario& spec, int64_t factor) {
  auto shrink = [factor](Transformer& t) {
    t.set_hidden_size(t.hidden_size() / factor);
    t.set_ffn_hidden_size(t.ffn_hidden_size() / factor);
    t.set_seq_length(t.seq_length() / factor);
  };
  shrink(*spec.mutable_model()->mutable_llm());
  for (auto& enc : *spec.mutable_model()->mutable_encoders()) shrink(*enc.mutable_transformer());
}

// Every factor > 1 that scales `spec` into a valid scenario, ascending.
std::vector<int64_t> valid_factors(const Scenario& spec) {
  int64_t g = 0;
  for (const Stack& st : stacks(spec)) {
    for (int64_t v : {st.t->hidden_size(), st.t->ffn_hidden_size(), st.t->seq_length()}) {
      if (v < 1) return {};
      g = std::gcd(g, v);
    }
  }
  std::vector<int64_t> divisors;
  for (int64_t d = 2; d <= g; ++d)
    if (g % d == 0) divisors.push_back(d);
  std::vector<int64_t> out;
  for (int64_t d : divisors) {
    if (check(spec, d)) continue;
    Scenario scaled = spec;
    apply(scaled, d);
    try {
      validate_scenario(scaled, SourceMap{});
      out.push_back(d);
    } catch (const Error&) {
      // not valid at this factor
    }
  }
  return out;
}

std::string list(const std::vector<int64_t>& v) {
  std::string out;
  for (size_t i = 0; i < v.size() && i < 8; ++i) out += (i ? ", " : "") + s(v[i]);
  if (v.size() > 8) out += ", ...";
  return out;
}

}  // namespace

int64_t largest_scale_down(const Scenario& spec) {
  const auto f = valid_factors(spec);
  return f.empty() ? 1 : f.back();
}

void scale_down(Scenario& spec, int64_t factor) { scale_down(spec, factor, SourceMap{}); }

void scale_down(Scenario& spec, int64_t factor, const SourceMap& locations) {
  if (factor < 1)
    throw Error(SourceLocation{{}, 0, 0, "‹scale-down›"}, "must be ≥ 1, got " + s(factor),
                "use 1 (or omit it) for the scenario as written, 2 to halve hidden sizes and sequence lengths");
  if (factor == 1) return;
  if (const auto p = check(spec, factor)) {
    const auto ok = valid_factors(spec);
    const std::string fix =
        ok.empty() ? "no factor above 1 scales this scenario (its hidden, FFN and sequence sizes share no factor "
                     "that keeps head dimensions whole and the scenario valid); run it unscaled"
                   : "use " + option_ref("scale-down", s(ok.back())) + ", the largest factor this scenario takes (valid: " +
                         list(ok) + ")";
    throw Error(locations.locate(p->path), option_ref("scale-down", s(factor)) + ": " + p->what, fix);
  }
  apply(spec, factor);
}

}  // namespace lacuna::scenario
