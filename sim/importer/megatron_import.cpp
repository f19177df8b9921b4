#include "sim/importer/megatron_import.h"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <regex>
#include <set>

#include "sim/core/error.h"

namespace lacuna::importer {

namespace {

using scenario::Transformer;

// Citations of the defaults below, Megatron-LM d98e8a64 (2026-08-22).
constexpr const char* kArgs = "megatron/training/arguments.py";
constexpr const char* kTc = "megatron/core/transformer/transformer_config.py";
constexpr const char* kMpc = "megatron/core/model_parallel_config.py";

// Flags that take no value (store_true / store_false in arguments.py or the
// config dataclasses' bool fields).
const std::set<std::string>& boolean_flags() {
  static const std::set<std::string> s = {
      "--group-query-attention", "--swiglu", "--untie-embeddings-and-output-weights", "--disable-bias-linear",
      "--sequence-parallel", "--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather",
      "--tp-comm-overlap", "--moe-grouped-gemm", "--bf16", "--fp16", "--recompute-activations",
      "--use-rotary-position-embeddings", "--no-position-embedding", "--moe-pad-expert-input-to-capacity",
      "--fp8-param-gather", "--use-flash-attn", "--no-gradient-accumulation-fusion", "--overlap-p2p-communication",
      "--no-masked-softmax-fusion", "--no-bias-gelu-fusion", "--no-bias-dropout-fusion", "--no-bias-swiglu-fusion",
      "--no-rope-fusion", "--use-mcore-models", "--use-legacy-models", "--no-async-tensor-model-parallel-allreduce",
      "--accumulate-allreduce-grads-in-fp32", "--apply-query-key-layer-scaling", "--attention-softmax-in-fp32",
      "--no-load-optim", "--no-load-rng", "--no-save-optim", "--no-save-rng", "--use-checkpoint-args",
      "--exit-on-missing-checkpoint", "--log-throughput", "--log-timers-to-tensorboard", "--log-params-norm",
      "--log-num-zeros-in-grad", "--log-validation-ppl-to-tensorboard", "--log-memory-to-tensorboard",
      "--no-create-attention-mask-in-dataloader", "--mock-data", "--manual-gc", "--use-torch-fsdp2",
      "--check-for-nan-in-loss-and-grad", "--no-check-for-nan-in-loss-and-grad", "--qk-layernorm",
      "--moe-router-pre-softmax", "--moe-permute-fusion", "--moe-router-fusion", "--calculate-per-token-loss",
      "--use-precision-aware-optimizer", "--fp8-dot-product-attention", "--no-persist-layer-norm",
      "--cross-entropy-loss-fusion", "--defer-embedding-wgrad-compute", "--use-rope-scaling", "--add-qkv-bias", "--moe-use-legacy-grouped-gemm",
      "--align-param-gather", "--tp-comm-overlap-disable-qkv"};
  return s;
}

// Flags read for the scenario or known to leave the simulated step alone
// (optimizer hyperparameters, data, checkpoints, logging).
bool ignorable(const std::string& flag) {
  static const std::set<std::string> exact = {
      "--lr", "--min-lr", "--lr-decay-style", "--lr-decay-iters", "--lr-decay-samples", "--lr-warmup-fraction",
      "--lr-warmup-iters", "--lr-warmup-samples", "--weight-decay", "--adam-beta1", "--adam-beta2", "--adam-eps",
      "--init-method-std", "--train-iters", "--train-samples", "--eval-iters", "--eval-interval", "--log-interval",
      "--save-interval", "--save", "--load", "--data-path", "--split", "--vocab-file", "--merge-file",
      "--tokenizer-model", "--data-cache-path", "--tensorboard-dir", "--seed", "--optimizer", "--wandb-project",
      "--wandb-exp-name", "--ckpt-format", "--num-workers", "--distributed-backend", "--no-load-optim",
      "--no-load-rng", "--no-save-optim", "--no-save-rng", "--use-checkpoint-args", "--exit-on-missing-checkpoint",
      "--log-throughput", "--log-timers-to-tensorboard", "--log-params-norm", "--log-num-zeros-in-grad",
      "--log-validation-ppl-to-tensorboard", "--log-memory-to-tensorboard", "--mock-data", "--rotary-base",
      "--rotary-percent", "--norm-epsilon", "--layernorm-epsilon", "--use-mcore-models", "--use-legacy-models",
      "--transformer-impl", "--use-flash-attn", "--attention-softmax-in-fp32", "--accumulate-allreduce-grads-in-fp32",
      "--apply-query-key-layer-scaling", "--timing-log-level", "--timing-log-option",
      "--tensorboard-log-interval", "--moe-aux-loss-coeff", "--moe-router-load-balancing-type", "--moe-z-loss-coeff",
      "--moe-router-pre-softmax", "--moe-router-score-function", "--moe-router-topk-scaling-factor",
      "--moe-router-enable-expert-bias", "--moe-router-bias-update-rate", "--moe-router-dtype", "--kv-channels",
      "--calculate-per-token-loss", "--use-rope-scaling", "--rope-scaling-factor", "--qk-layernorm",
      "--moe-permute-fusion", "--moe-router-fusion", "--cross-entropy-loss-fusion", "--manual-gc",
      "--manual-gc-interval", "--empty-unused-memory-level", "--data-parallel-random-init", "--eod-mask-loss",
      "--no-create-attention-mask-in-dataloader", "--use-torch-fsdp2", "--max-position-embeddings",
      "--make-vocab-size-divisible-by", "--tokenizer-type", "--fp8-amax-history-len", "--fp8-amax-compute-algo",
      "--fp8-margin", "--fp8-interval"};
  return exact.count(flag) > 0;
}

struct Flags {
  std::map<std::string, std::string> values;  // flag → value ("" for booleans)
  std::vector<std::string> launcher;          // the words before the script (torchrun ...)
  std::vector<std::string> order;             // as given
  std::set<std::string> used;

  bool has(const std::string& f) {
    used.insert(f);
    return values.count(f) > 0;
  }
  std::optional<std::string> text(const std::string& f) {
    used.insert(f);
    auto it = values.find(f);
    if (it == values.end()) return std::nullopt;
    return it->second;
  }
  std::optional<int64_t> integer(const std::string& f) {
    auto v = text(f);
    if (!v) return std::nullopt;
    errno = 0;
    char* end = nullptr;
    const long long x = std::strtoll(v->c_str(), &end, 10);
    if (v->empty() || *end != '\0' || errno != 0)
      throw Error(SourceLocation{"megatron args", 0, 0, f}, "must be an integer, got \"" + *v + "\"",
                  "write e.g. " + f + " 8");
    return x;
  }
  std::optional<double> number(const std::string& f) {
    auto v = text(f);
    if (!v) return std::nullopt;
    char* end = nullptr;
    const double x = std::strtod(v->c_str(), &end);
    if (v->empty() || *end != '\0' || !std::isfinite(x))
      throw Error(SourceLocation{"megatron args", 0, 0, f}, "must be a number, got \"" + *v + "\"",
                  "write e.g. " + f + " 0.1");
    return x;
  }
};

Flags parse_flags(const std::vector<std::string>& args) {
  Flags flags;
  size_t i = 0;
  // Skip the launcher and script: everything up to the first word ending in ".py".
  for (size_t k = 0; k < args.size(); ++k)
    if (args[k].size() > 3 && args[k].compare(args[k].size() - 3, 3, ".py") == 0) i = k + 1;
  flags.launcher.assign(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(i));
  for (; i < args.size(); ++i) {
    std::string flag = args[i];
    if (flag.rfind("--", 0) != 0)
      throw Error(SourceLocation{"megatron args", 0, 0, {}}, "\"" + flag + "\" is not a --flag nor a flag's value",
                  "pass the words after pretrain_gpt.py, e.g. --num-layers 96 --hidden-size 12288");
    std::string value;
    if (auto eq = flag.find('='); eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else if (!boolean_flags().count(flag) && i + 1 < args.size() &&
               (args[i + 1].rfind("--", 0) != 0 || args[i + 1] == "--")) {
      value = args[++i];
      // nargs='+' flags (--data-path 1 a 1 b): the words up to the next flag.
      while (i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0) value += " " + args[++i];
    }
    if (!flags.values.count(flag)) flags.order.push_back(flag);
    flags.values[flag] = value;  // argparse: the last one wins
  }
  return flags;
}

// A value and its source, as the layout options take it.
Sourced<int64_t> sourced(Flags& f, const std::string& flag) {
  Sourced<int64_t> s;
  if (auto v = f.integer(flag)) s.set(*v, flag);
  return s;
}

}  // namespace

std::vector<std::string> split_command_line(std::string_view text) {
  std::vector<std::string> out;
  std::string cur;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (quote) {
      if (ch == quote) quote = 0;
      else cur += ch;
      continue;
    }
    if (ch == '\\' && i + 1 < text.size() && (text[i + 1] == '\n' || text[i + 1] == '\r')) {
      ++i;
      if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      continue;
    }
    if (ch == '#' && !in_word) {
      while (i < text.size() && text[i] != '\n') ++i;
      continue;
    }
    if (ch == '\'' || ch == '"') {
      quote = ch;
      in_word = true;
      continue;
    }
    if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r') {
      if (in_word) out.push_back(cur);
      cur.clear();
      in_word = false;
      continue;
    }
    cur += ch;
    in_word = true;
  }
  if (in_word) out.push_back(cur);
  return out;
}

Annotated import_megatron(const std::vector<std::string>& args, const MegatronOptions& options) {
  Flags f = parse_flags(args);
  Annotated a;
  a.header.push_back("Imported by `lacuna import megatron` from a Megatron-LM command line.");
  a.header.push_back(fmt::format("Each field names its flag, or the default of Megatron-LM (NVIDIA/Megatron-LM "
                                 "d98e8a64: {}, {}, {}) or of lacuna (docs/import.md).",
                                 kArgs, kTc, kMpc));
  a.spec.set_name("megatron-import");
  a.from("name", "default");

  // ---- model
  auto& t = *a.spec.mutable_model()->mutable_llm();
  const std::string p = "model.llm.";
  std::vector<std::string> missing;
  auto need = [&](const std::string& flag, const std::string& path) -> int64_t {
    auto v = f.integer(flag);
    if (!v) {
      missing.push_back(flag);
      return 0;
    }
    a.from(path, flag);
    return *v;
  };
  t.set_name("gpt");
  a.from(p + "name", "default");
  const int64_t layers = need("--num-layers", p + "num_layers");
  const int64_t hidden = need("--hidden-size", p + "hidden_size");
  const int64_t heads = need("--num-attention-heads", p + "num_attention_heads");
  const int64_t seq = need("--seq-length", p + "seq_length");
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
    throw Error(SourceLocation{"megatron args", 0, 0, missing.front()},
                "the command line lacks " + list + " (required by Megatron-LM's arguments.py for GPT models)",
                "pass the full pretrain_gpt.py argument list");
  }
  t.set_num_layers(layers);
  t.set_hidden_size(hidden);
  t.set_num_attention_heads(heads);
  t.set_seq_length(seq);
  if (f.has("--group-query-attention")) {
    auto groups = f.integer("--num-query-groups");
    t.set_num_kv_heads(groups.value_or(1));
    a.from(p + "num_kv_heads", groups ? "--group-query-attention --num-query-groups"
                                      : fmt::format("default: num_query_groups 1 ({} num_query_groups)", kTc));
  } else {
    t.set_num_kv_heads(heads);
    (void)f.integer("--num-query-groups");
    a.from(p + "num_kv_heads", fmt::format("default: num_attention_heads (no --group-query-attention; {})", kTc));
  }
  const bool swiglu = f.has("--swiglu");
  if (auto ffn = f.integer("--ffn-hidden-size")) {
    t.set_ffn_hidden_size(*ffn);
    a.from(p + "ffn_hidden_size", "--ffn-hidden-size");
  } else {
    // arguments.py validate_args: int((4·h·2/3) / 64) · 64 with --swiglu, else 4·h.
    t.set_ffn_hidden_size(swiglu ? (4 * hidden * 2 / 3) / 64 * 64 : 4 * hidden);
    a.from(p + "ffn_hidden_size", fmt::format("default: {} ({} validate_args)",
                                              swiglu ? "int(4·h·2/3 / 64)·64 with --swiglu" : "4 × hidden_size", kArgs));
  }
  t.set_activation(swiglu ? scenario::SWIGLU : scenario::GELU);
  a.from(p + "activation", swiglu ? "--swiglu" : fmt::format("default: GELU (no --swiglu; {})", kArgs));
  const std::string norm = f.text("--normalization").value_or("LayerNorm");
  if (norm != "LayerNorm" && norm != "RMSNorm")
    throw Error(SourceLocation{"megatron args", 0, 0, "--normalization"}, "unknown normalization \"" + norm + "\"",
                "use LayerNorm or RMSNorm");
  t.set_norm(norm == "RMSNorm" ? scenario::RMSNORM : scenario::LAYERNORM);
  a.from(p + "norm", f.has("--normalization") ? "--normalization" : fmt::format("default: LayerNorm ({})", kTc));

  // Vocabulary: --vocab-size, or GPT-2's BPE (50257 tokens) for
  // GPT2BPETokenizer; padded as Megatron-LM pads it.
  const int64_t tp_flag = f.integer("--tensor-model-parallel-size").value_or(1);
  const int64_t divisible = f.integer("--make-vocab-size-divisible-by").value_or(128);
  std::optional<int64_t> vocab = f.integer("--vocab-size");
  std::string vocab_from = "--vocab-size";
  const std::string tokenizer = f.text("--tokenizer-type").value_or("");
  if (!vocab && tokenizer == "GPT2BPETokenizer") {
    vocab = 50257;
    vocab_from = "--tokenizer-type GPT2BPETokenizer (GPT-2's 50257 BPE tokens)";
  }
  if (!vocab)
    throw Error(SourceLocation{"megatron args", 0, 0, "--vocab-size"},
                "the vocabulary size is not on the command line" +
                    (tokenizer.empty() ? std::string() : " (tokenizer " + tokenizer + " reads it from a file)"),
                "add --vocab-size N (the tokenizer's size before padding)");
  const int64_t padded = padded_vocab(*vocab, divisible, tp_flag);
  t.set_vocab_size(padded);
  a.from(p + "vocab_size", fmt::format("{} {} padded to a multiple of make_vocab_size_divisible_by {} × tp {} "
                                       "(megatron/core/tokenizers/utils/build_tokenizer.py)",
                                       vocab_from, *vocab, divisible, tp_flag));

  const std::string pos = f.has("--use-rotary-position-embeddings")
                              ? "rope"
                              : (f.has("--no-position-embedding") ? "none"
                                                                  : f.text("--position-embedding-type").value_or("learned_absolute"));
  if (pos == "rope" || pos == "yarn" || pos == "mrope") t.set_position_embedding(Transformer::POSITION_ROTARY);
  else if (pos == "learned_absolute") t.set_position_embedding(Transformer::POSITION_LEARNED);
  else if (pos == "none") t.set_position_embedding(Transformer::POSITION_NONE);
  else
    throw Error(SourceLocation{"megatron args", 0, 0, "--position-embedding-type"},
                "position embedding \"" + pos + "\" is not modelled", "use rope, learned_absolute or none");
  a.from(p + "position_embedding", f.has("--position-embedding-type") || pos != "learned_absolute"
                                       ? "--position-embedding-type"
                                       : fmt::format("default: learned_absolute ({})", kArgs));
  if (f.has("--untie-embeddings-and-output-weights")) {
    t.set_untie_embeddings_and_output_weights(true);
    a.from(p + "untie_embeddings_and_output_weights", "--untie-embeddings-and-output-weights");
  }
  if (!f.has("--disable-bias-linear")) {
    t.set_linear_bias(true);
    a.from(p + "linear_bias", fmt::format("default: add_bias_linear true (no --disable-bias-linear; {})", kTc));
  }
  const double hidden_dropout = f.number("--hidden-dropout").value_or(0.1);
  const double attention_dropout = f.number("--attention-dropout").value_or(0.1);
  if (hidden_dropout > 0) {
    t.set_hidden_dropout(hidden_dropout);
    a.from(p + "hidden_dropout", f.has("--hidden-dropout") ? "--hidden-dropout" : fmt::format("default: 0.1 ({})", kTc));
  }
  if (attention_dropout > 0) {
    t.set_attention_dropout(attention_dropout);
    a.from(p + "attention_dropout",
           f.has("--attention-dropout") ? "--attention-dropout" : fmt::format("default: 0.1 ({})", kTc));
  }

  // ---- MoE
  if (auto experts = f.integer("--num-experts"); experts && *experts > 0) {
    auto& moe = *t.mutable_moe();
    const std::string m = p + "moe.";
    moe.set_num_experts(*experts);
    a.from(m + "num_experts", "--num-experts");
    moe.set_top_k(f.integer("--moe-router-topk").value_or(2));
    a.from(m + "top_k", f.has("--moe-router-topk") ? "--moe-router-topk" : fmt::format("default: 2 ({})", kTc));
    if (auto w = f.integer("--moe-ffn-hidden-size")) {
      moe.set_expert_ffn_hidden_size(*w);
      a.from(m + "expert_ffn_hidden_size", "--moe-ffn-hidden-size");
    }
    if (auto w = f.integer("--moe-shared-expert-intermediate-size"); w && *w > 0) {
      moe.set_shared_expert_ffn_hidden_size(*w);
      a.from(m + "shared_expert_ffn_hidden_size", "--moe-shared-expert-intermediate-size");
    }
    if (auto freq = f.text("--moe-layer-freq")) {
      // An integer N, or a pattern "([0]*K+[1]*M)": K leading dense layers.
      static const std::regex leading(R"(\(?\s*\[0\]\s*\*\s*(\d+)\s*\+\s*\[1\]\s*\*\s*(\d+)\s*\)?)");
      std::smatch match;
      char* end = nullptr;
      errno = 0;
      const long long n = std::strtoll(freq->c_str(), &end, 10);
      const bool out_of_range = errno == ERANGE;
      if (out_of_range)
        throw Error(SourceLocation{"megatron args", 0, 0, "--moe-layer-freq"}, "\"" + *freq + "\" is out of range",
                    "write N (every N-th layer MoE) or ([0]*K+[1]*M)");
      if (!freq->empty() && *end == '\0' && n >= 1) {
        if (n > 1) {
          moe.set_layer_frequency(n);
          a.from(m + "layer_frequency", "--moe-layer-freq");
        }
      } else if (std::regex_match(*freq, match, leading)) {
        errno = 0;
        const long long k = std::strtoll(match[1].str().c_str(), nullptr, 10);
        if (errno == ERANGE)
          throw Error(SourceLocation{"megatron args", 0, 0, "--moe-layer-freq"},
                      "\"" + *freq + "\": the count of leading dense layers is out of range",
                      "write ([0]*K+[1]*M) with K below the number of layers");
        moe.set_first_dense_layers(k);
        a.from(m + "first_dense_layers", "--moe-layer-freq " + *freq + " (leading dense layers)");
      } else {
        a.warnings.push_back("--moe-layer-freq " + *freq +
                             ": only an integer or ([0]*K+[1]*M) is modelled; every layer is MoE here");
      }
    }
    if (auto cf = f.number("--moe-expert-capacity-factor"); cf && *cf > 0) {
      moe.set_capacity_factor(*cf);
      a.from(m + "capacity_factor", "--moe-expert-capacity-factor");
    }
    if (f.has("--moe-pad-expert-input-to-capacity")) {
      moe.set_pad_to_capacity(true);
      a.from(m + "pad_to_capacity", "--moe-pad-expert-input-to-capacity");
    }
    const std::string disp = f.text("--moe-token-dispatcher-type").value_or("allgather");
    if (disp == "alltoall") moe.set_dispatcher(scenario::DISPATCHER_ALLTOALL);
    else if (disp == "allgather") moe.set_dispatcher(scenario::DISPATCHER_ALLGATHER);
    else if (disp == "flex") moe.set_dispatcher(scenario::DISPATCHER_HIERARCHICAL);
    else
      throw Error(SourceLocation{"megatron args", 0, 0, "--moe-token-dispatcher-type"},
                  "unknown dispatcher \"" + disp + "\"", "use allgather, alltoall or flex");
    a.from(m + "dispatcher", f.has("--moe-token-dispatcher-type") ? "--moe-token-dispatcher-type"
                                                                  : fmt::format("default: allgather ({})", kTc));
    moe.set_grouped_gemm(f.has("--moe-grouped-gemm"));
    a.from(m + "grouped_gemm", moe.grouped_gemm() ? "--moe-grouped-gemm" : fmt::format("default: false ({})", kTc));
  }

  // ---- layout (dp from the GPU count)
  LayoutOptions lo = options.layout;
  // torchrun's --nnodes / --nproc-per-node (or --nproc_per_node) before the
  // script, when the import command was not given the cluster's size.
  for (size_t k = 0; k + 1 < f.launcher.size(); ++k) {
    const std::string& w = f.launcher[k];
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(f.launcher[k + 1].c_str(), &end, 10);
    if (*end != '\0' || v <= 0 || errno == ERANGE) continue;
    if (w == "--nnodes" && !lo.num_nodes.value) lo.num_nodes.set(v, "torchrun --nnodes");
    if ((w == "--nproc-per-node" || w == "--nproc_per_node") && !lo.gpus_per_node.value)
      lo.gpus_per_node.set(v, "torchrun --nproc-per-node");
  }
  lo.tp = sourced(f, "--tensor-model-parallel-size");
  lo.pp = sourced(f, "--pipeline-model-parallel-size");
  lo.cp = sourced(f, "--context-parallel-size");
  lo.ep = sourced(f, "--expert-model-parallel-size");
  lo.expert_tp = sourced(f, "--expert-tensor-parallel-size");
  const int64_t pp = lo.pp.value.value_or(1);
  if (auto per = f.integer("--num-layers-per-virtual-pipeline-stage")) {
    if (*per <= 0 || pp <= 0 || layers % pp != 0 || (layers / pp) % *per != 0)
      throw Error(SourceLocation{"megatron args", 0, 0, "--num-layers-per-virtual-pipeline-stage"},
                  fmt::format("{} layers per virtual stage do not divide the {} layers per pipeline stage", *per,
                              pp > 0 ? layers / pp : 0),
                  "as Megatron-LM requires (arguments.py): choose a divisor");
    lo.virtual_stages.set(layers / pp / *per, "--num-layers-per-virtual-pipeline-stage: layers / pp / this");
  } else if (auto v = f.integer("--num-virtual-stages-per-pipeline-rank")) {
    lo.virtual_stages.set(*v, "--num-virtual-stages-per-pipeline-rank");
  } else if (auto v2 = f.integer("--virtual-pipeline-model-parallel-size")) {
    lo.virtual_stages.set(*v2, "--virtual-pipeline-model-parallel-size");
  }
  if (f.has("--sequence-parallel")) lo.sequence_parallel.set(true, "--sequence-parallel");
  lo.micro_batch = sourced(f, "--micro-batch-size");
  if (!lo.micro_batch.value) lo.micro_batch.set(1, fmt::format("default: 1 ({})", kArgs));
  lo.global_batch = sourced(f, "--global-batch-size");
  apply_layout(lo, a);
  auto& par = *a.spec.mutable_parallel();
  if (!f.has("--global-batch-size")) {
    // Megatron-LM: global_batch_size = micro_batch_size × data_parallel_size.
    a.spec.mutable_training()->set_global_batch(a.spec.training().micro_batch() * par.dp());
    a.from("training.global_batch", fmt::format("default: micro_batch × dp ({})", kArgs));
  }
  for (const auto& [flag, path] : {std::pair<const char*, const char*>{"--use-distributed-optimizer", "distributed_optimizer"},
                                   {"--overlap-grad-reduce", "overlap_grad_reduce"},
                                   {"--overlap-param-gather", "overlap_param_gather"}}) {
    if (!f.has(flag)) continue;
    const auto* field = par.GetDescriptor()->FindFieldByName(path);
    par.GetReflection()->SetBool(&par, field, true);
    a.from(std::string("parallel.") + path, flag);
  }
  if (auto b = f.integer("--ddp-bucket-size")) {
    par.set_ddp_bucket_size(*b);
    a.from("parallel.ddp_bucket_size", "--ddp-bucket-size");
  }
  if (auto n = f.integer("--decoder-first-pipeline-num-layers")) {
    par.set_first_stage_layers(*n);
    a.from("parallel.first_stage_layers", "--decoder-first-pipeline-num-layers");
  }
  if (auto n = f.integer("--decoder-last-pipeline-num-layers")) {
    par.set_last_stage_layers(*n);
    a.from("parallel.last_stage_layers", "--decoder-last-pipeline-num-layers");
  }
  const std::string gran = f.has("--recompute-activations") ? "selective" : f.text("--recompute-granularity").value_or("");
  if (gran == "full") {
    par.set_recompute(scenario::RECOMPUTE_FULL);
    a.from("parallel.recompute", "--recompute-granularity full");
    const std::string method = f.text("--recompute-method").value_or("");
    if (auto n = f.integer("--recompute-num-layers"); n && method == "block") {
      par.set_recompute_num_layers(*n);
      a.from("parallel.recompute_num_layers", "--recompute-method block --recompute-num-layers");
    } else if (method == "uniform") {
      a.add_note("parallel.recompute", "--recompute-method uniform (chunks of --recompute-num-layers layers) is "
                                       "modelled as full recompute of every layer.");
    }
  } else if (gran == "selective") {
    par.set_recompute(scenario::RECOMPUTE_SELECTIVE);
    a.from("parallel.recompute", f.has("--recompute-activations") ? "--recompute-activations"
                                                                   : "--recompute-granularity selective");
  } else if (!gran.empty()) {
    throw Error(SourceLocation{"megatron args", 0, 0, "--recompute-granularity"}, "unknown granularity \"" + gran + "\"",
                "use full or selective");
  }
  (void)f.text("--recompute-method");
  (void)f.integer("--recompute-num-layers");

  // ---- execution switches
  auto& ex = *a.spec.mutable_execution();
  if (f.has("--tp-comm-overlap")) {
    ex.set_tp_comm_overlap(true);
    a.from("execution.tp_comm_overlap", "--tp-comm-overlap");
  }
  if (f.has("--overlap-p2p-communication")) {
    ex.set_pipeline_p2p(scenario::P2P_OVERLAPPED);
    a.from("execution.pipeline_p2p", "--overlap-p2p-communication");
  }
  if (f.has("--no-gradient-accumulation-fusion")) {
    ex.set_gradient_accumulation_fusion(false);
    a.from("execution.gradient_accumulation_fusion", "--no-gradient-accumulation-fusion");
  }
  if (auto clip = f.number("--clip-grad")) {
    ex.set_clip_grad(*clip);
    a.from("execution.clip_grad", "--clip-grad");
  }

  // ---- precision
  auto& tr = *a.spec.mutable_training();
  const auto fp8 = f.text("--fp8-format");
  if (fp8) {
    tr.set_precision(scenario::FP8);
    a.from("training.precision", "--fp8-format " + *fp8);
    const std::string recipe = f.text("--fp8-recipe").value_or("delayed");
    static const std::map<std::string, scenario::Fp8Recipe> recipes = {{"delayed", scenario::FP8_DELAYED},
                                                                       {"tensorwise", scenario::FP8_CURRENT},
                                                                       {"blockwise", scenario::FP8_BLOCKWISE},
                                                                       {"mxfp8", scenario::FP8_MXFP8}};
    auto it = recipes.find(recipe);
    if (it == recipes.end())
      throw Error(SourceLocation{"megatron args", 0, 0, "--fp8-recipe"}, "recipe \"" + recipe + "\" is not modelled",
                  "use delayed, tensorwise, blockwise or mxfp8");
    tr.mutable_fp8()->set_recipe(it->second);
    a.from("training.fp8.recipe", f.has("--fp8-recipe") ? "--fp8-recipe" : fmt::format("default: delayed ({})", kTc));
    if (f.has("--fp8-param-gather")) {
      tr.mutable_fp8()->set_param_gather(true);
      a.from("training.fp8.param_gather", "--fp8-param-gather");
    }
    if (f.has("--fp8-dot-product-attention")) {
      tr.mutable_fp8()->set_attention(true);
      a.from("training.fp8.attention", "--fp8-dot-product-attention");
    }
    if (auto len = f.integer("--fp8-amax-history-len")) {
      tr.mutable_fp8()->set_amax_history_len(*len);
      a.from("training.fp8.amax_history_len", "--fp8-amax-history-len");
    }
  } else if (f.has("--bf16")) {
    tr.set_precision(scenario::BF16);
    a.from("training.precision", "--bf16");
  } else if (f.has("--fp16")) {
    tr.set_precision(scenario::FP16);
    a.from("training.precision", "--fp16");
  } else {
    tr.set_precision(scenario::FP32);
    a.from("training.precision", fmt::format("default: fp32 (neither --bf16 nor --fp16; {})", kMpc));
  }
  (void)f.has("--bf16");
  (void)f.has("--fp16");

  // ---- flags not mapped
  std::string unknown, ignored;
  for (const auto& flag : f.order) {
    if (f.used.count(flag)) continue;
    std::string& list = ignorable(flag) ? ignored : unknown;
    list += (list.empty() ? "" : " ") + flag;
  }
  if (!ignored.empty()) a.header.push_back("Ignored (no effect on the simulated step): " + ignored);
  if (!unknown.empty()) {
    a.header.push_back("Not mapped (unknown to lacuna's importer; check they do not change the step): " + unknown);
    a.warnings.push_back("flags not mapped: " + unknown);
  }
  return a;
}

}  // namespace lacuna::importer
