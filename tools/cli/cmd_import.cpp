// `lacuna import hf CONFIG.json` and `lacuna import megatron ARGS...`: write
// a scenario from what users already have (docs/import.md). The scenario is
// validated as `lacuna check` would before anything is written; every field
// carries a comment naming its source.
#include <cerrno>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sim/core/atomic_file.h"
#include "sim/core/error.h"
#include "sim/core/input_file.h"
#include "sim/importer/hf_import.h"
#include "sim/importer/megatron_import.h"
#include "sim/scenario/scenario.h"
#include "tools/cli/commands.h"
#include "tools/cli/output_checks.h"

namespace lacuna::cli {

namespace {

// What an import reads, with the cap of a scenario file (several times the
// largest config.json on the Hub, docs/reliability.md#inputs).
constexpr InputKind kHfConfigInput{"Hugging Face config.json", 16 * kMiB,
                                   "pass the model's config.json as downloaded from the Hugging Face Hub"};
constexpr InputKind kMegatronScriptInput{"Megatron-LM launch script", 16 * kMiB,
                                         "pass the shell script or text file holding the pretrain_gpt.py command line"};

struct CommonOptions {
  std::string output;
  std::string cluster_preset = "h100-sxm";
  std::optional<int64_t> num_nodes, gpus_per_node;
};

std::optional<int64_t> world_size_env() {
  const char* w = std::getenv("WORLD_SIZE");
  if (!w || !*w) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(w, &end, 10);
  if (*end != '\0' || v <= 0 || errno == ERANGE)
    throw Error(SourceLocation{"WORLD_SIZE", 0, 0, {}}, fmt::format("\"{}\" is not a positive integer", w),
                "unset it or pass --num-nodes");
  return v;
}

void fill_cluster(const CommonOptions& c, importer::LayoutOptions& lo) {
  lo.cluster_preset = c.cluster_preset;
  if (c.num_nodes) lo.num_nodes.set(*c.num_nodes, "--num-nodes");
  if (c.gpus_per_node) lo.gpus_per_node.set(*c.gpus_per_node, "--gpus-per-node");
  lo.world_size = world_size_env();
}

// Before reading anything: the output is none of the inputs and can be written.
void check_import_output(const CommonOptions& c, const std::vector<NamedPath>& inputs) {
  if (!c.output.empty()) check_outputs({{"--output", c.output}}, inputs);
}

// Validates as `lacuna check` does, then writes atomically (or to stdout).
int finish(const importer::Annotated& a, const CommonOptions& c, const std::vector<NamedPath>& inputs) {
  const std::string text = importer::write_annotated(a);
  const std::string shown = c.output.empty() ? "<imported scenario>" : c.output;
  try {
    (void)scenario::parse_scenario(text, scenario::Format::kText, shown);
  } catch (const Error& e) {
    throw Error(e.where(), "the imported scenario does not pass `lacuna check`: " + e.problem(),
                (e.fix().empty() ? std::string() : e.fix() + "; ") +
                    "pass the layout to the import command (--num-nodes, --tp, --pp, ...)");
  }
  for (const std::string& w : a.warnings) fmt::print(stderr, "lacuna: warning: {}\n", w);
  if (c.output.empty()) {
    fmt::print("{}", text);
    return 0;
  }
  check_outputs({{"--output", c.output}}, inputs);
  AtomicFile out(c.output);
  out.write(text);
  out.commit();
  fmt::print(stderr, "lacuna: wrote {} (check it with `lacuna check {}`)\n", c.output, c.output);
  return 0;
}

void add_common(CLI::App* sub, CommonOptions& c) {
  sub->add_option("-o,--output", c.output, "scenario file to write (.pbtxt); default: stdout");
  sub->add_option("--cluster-preset", c.cluster_preset, "hardware preset (default h100-sxm)");
  sub->add_option("--num-nodes", c.num_nodes, "nodes (default: WORLD_SIZE / GPUs per node, else 1)");
  sub->add_option("--gpus-per-node", c.gpus_per_node, "GPUs per node (default: the preset's)");
}

struct HfCommand {
  CommonOptions common;
  std::string config;
  std::vector<std::string> encoders;
  std::optional<int64_t> tp, cp, pp, dp, ep, expert_tp, vp, micro, global, seq;
  bool sp = false, distopt = false;
  std::optional<int64_t> images, image_size;
};

int run_hf(const HfCommand& h) {
  std::vector<NamedPath> inputs{{"CONFIG", h.config}};
  for (const std::string& e : h.encoders) inputs.push_back({"--encoder", e});
  check_import_output(h.common, inputs);
  importer::HfOptions o;
  fill_cluster(h.common, o.layout);
  auto opt = [](importer::Sourced<int64_t>& s, const std::optional<int64_t>& v, const char* flag) {
    if (v) s.set(*v, flag);
  };
  opt(o.layout.tp, h.tp, "--tp");
  opt(o.layout.cp, h.cp, "--cp");
  opt(o.layout.pp, h.pp, "--pp");
  opt(o.layout.dp, h.dp, "--dp");
  opt(o.layout.ep, h.ep, "--ep");
  opt(o.layout.expert_tp, h.expert_tp, "--expert-tp");
  opt(o.layout.virtual_stages, h.vp, "--virtual-stages");
  opt(o.layout.micro_batch, h.micro, "--micro-batch");
  opt(o.layout.global_batch, h.global, "--global-batch");
  opt(o.layout.seq_length, h.seq, "--seq-length");
  if (h.sp) o.layout.sequence_parallel.set(true, "--sequence-parallel");
  if (h.distopt) o.layout.distributed_optimizer.set(true, "--distributed-optimizer");
  if (h.images) {
    if (*h.images <= 0)
      throw Error(SourceLocation{{}, 0, 0, "--images-per-sample"}, fmt::format("{} images per sample", *h.images),
                  "give a positive count, or leave the option out for one image per sample");
    o.images_per_sample = *h.images;
  }
  if (h.image_size) {
    if (*h.image_size <= 0)
      throw Error(SourceLocation{{}, 0, 0, "--image-size"}, fmt::format("{} is not an image side", *h.image_size),
                  "give the side in pixels (a positive integer, e.g. 448), or leave the option out for the config's");
    o.image_size = *h.image_size;
  }
  // An error inside an encoder's file names the option it came in by.
  const auto by_option = [&](const Error& e) {
    for (const std::string& enc : h.encoders)
      if (e.where().file == enc && e.where().field.empty() && enc != h.config)
        return Error(SourceLocation{enc, e.where().line, e.where().column, "--encoder"}, e.problem(), e.fix());
    return e;
  };
  try {
    for (const std::string& e : h.encoders) o.encoders.push_back({read_input_file(e, kHfConfigInput), e});
    const importer::Annotated a = importer::import_hf({read_input_file(h.config, kHfConfigInput), h.config}, o);
    return finish(a, h.common, inputs);
  } catch (const Error& e) {
    throw by_option(e);
  }
}

struct MegatronCommand {
  CommonOptions common;
  std::string from;
  CLI::App* sub = nullptr;
  CLI::App* parent = nullptr;
};

int run_megatron(const MegatronCommand& m) {
  const std::vector<NamedPath> inputs{{"--from", m.from}};
  check_import_output(m.common, inputs);
  importer::MegatronOptions o;
  fill_cluster(m.common, o.layout);
  std::vector<std::string> args;
  if (!m.from.empty()) args = importer::split_command_line(read_input_file(m.from, kMegatronScriptInput));
  for (const CLI::App* app : {m.sub, m.parent})
    for (const std::string& w : app->remaining())
      if (!(w == "--" && args.empty())) args.push_back(w);
  if (args.empty())
    throw Error(SourceLocation{"import megatron", 0, 0, {}}, "no Megatron-LM arguments given",
                "pass them after the options (lacuna import megatron --num-nodes 4 -- --num-layers 32 ...) or "
                "--from a script");
  const importer::Annotated a = importer::import_megatron(args, o);
  return finish(a, m.common, inputs);
}

}  // namespace

void add_import_command(CLI::App& app, Action& action) {
  CLI::App* imp = app.add_subcommand("import", "Write a scenario from a Hugging Face config.json or a Megatron-LM "
                                               "command line (docs/import.md)");
  imp->require_subcommand(1);

  auto h = std::make_shared<HfCommand>();
  CLI::App* hf = imp->add_subcommand("hf", "Import a Hugging Face config.json (Llama, Qwen, Mixtral, DeepSeek-V3, "
                                           "ViT/SigLIP/InternViT, LLaVA/Qwen-VL)");
  hf->add_option("CONFIG", h->config, "config.json")->required();
  add_common(hf, h->common);
  hf->add_option("--encoder", h->encoders, "a vision encoder's config.json to add (repeatable)");
  hf->add_option("--tp", h->tp, "tensor parallelism (default 1)");
  hf->add_option("--cp", h->cp, "context parallelism (default 1)");
  hf->add_option("--pp", h->pp, "pipeline parallelism (default 1)");
  hf->add_option("--dp", h->dp, "data parallelism (default: GPUs / (tp·cp·pp))");
  hf->add_option("--ep", h->ep, "expert parallelism (MoE; default 1)");
  hf->add_option("--expert-tp", h->expert_tp, "expert tensor parallelism (MoE; default tp)");
  hf->add_option("--virtual-stages", h->vp, "model chunks per pipeline rank (default 1)");
  hf->add_flag("--sequence-parallel", h->sp, "sequence parallelism");
  hf->add_flag("--distributed-optimizer", h->distopt, "shard optimizer state over DP (default off, as Megatron-LM)");
  hf->add_option("--micro-batch", h->micro, "sequences per microbatch (default 1)");
  hf->add_option("--global-batch", h->global, "sequences per iteration (default dp × micro × 4·pp)");
  hf->add_option("--seq-length", h->seq, "training sequence length (default min(4096, max_position_embeddings))");
  hf->add_option("--images-per-sample", h->images, "images per sample of a multimodal model (default 1)");
  hf->add_option("--image-size", h->image_size, "image side in pixels (default: the config's; Qwen-VL 448)");
  hf->callback([h, &action] { action = [h] { return run_hf(*h); }; });

  auto m = std::make_shared<MegatronCommand>();
  CLI::App* meg = imp->add_subcommand("megatron", "Import a Megatron-LM pretrain_gpt.py command line (its model, "
                                                  "parallelism, batch and overlap flags)");
  add_common(meg, m->common);
  meg->add_option("--from", m->from, "a file holding the command line (a launch script)");
  // Everything from the first word that is not one of the options above is
  // the Megatron-LM command line, kept in order (CLI11's prefix command).
  meg->prefix_command();
  // After `--` CLI11 hands the words to the parent command: take them there.
  imp->prefix_command();
  m->parent = imp;
  m->sub = meg;
  meg->callback([m, &action] { action = [m] { return run_megatron(*m); }; });
}

}  // namespace lacuna::cli
