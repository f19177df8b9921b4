// The importers against real inputs: Hugging Face config.json files of
// tests/data/hf/ (sources in its README) and the GPT-3 command line of
// tests/data/megatron/, compared field by field with hand-written scenarios
// after both went through the same loader (presets, defaults, validation).
#include <gtest/gtest.h>

#include <google/protobuf/util/message_differencer.h>

#include <fstream>
#include <sstream>

#include "sim/core/error.h"
#include "sim/core/input_file.h"
#include "sim/importer/annotated.h"
#include "sim/importer/hf_import.h"
#include "sim/importer/megatron_import.h"
#include "sim/scenario/scenario.h"

namespace lacuna::importer {
namespace {

using google::protobuf::util::MessageDifferencer;

std::string data(const std::string& rel) { return std::string(LACUNA_SOURCE_DIR) + "/" + rel; }

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_TRUE(in.good() || in.eof()) << path;
  return ss.str();
}

ConfigFile hf_file(const std::string& name) {
  const std::string path = data("tests/data/hf/" + name);
  return {slurp(path), path};
}

// The imported text through the loader `lacuna check` uses.
scenario::Scenario load(const Annotated& a) {
  return scenario::parse_scenario(write_annotated(a), scenario::Format::kText, "imported.pbtxt").spec;
}

scenario::Scenario load_file(const std::string& rel) { return scenario::load_scenario(data(rel)).spec; }

// Equal after clearing the names (free text).
void expect_same_llm(scenario::Transformer got, scenario::Transformer want) {
  got.clear_name();
  want.clear_name();
  std::string diff;
  MessageDifferencer d;
  d.ReportDifferencesToString(&diff);
  EXPECT_TRUE(d.Compare(got, want)) << diff;
}

void expect_same(const google::protobuf::Message& got, const google::protobuf::Message& want) {
  std::string diff;
  MessageDifferencer d;
  d.ReportDifferencesToString(&diff);
  EXPECT_TRUE(d.Compare(got, want)) << diff;
}

int64_t opt(LayoutOptions& o, Sourced<int64_t> LayoutOptions::*field, int64_t v) {
  (o.*field).set(v, "test");
  return v;
}

TEST(ImportHf, Llama2_70bMatchesTheHandWrittenScenario) {
  HfOptions o;
  opt(o.layout, &LayoutOptions::tp, 8);
  opt(o.layout, &LayoutOptions::pp, 8);
  opt(o.layout, &LayoutOptions::num_nodes, 128);
  opt(o.layout, &LayoutOptions::global_batch, 512);
  o.layout.sequence_parallel.set(true, "test");
  const scenario::Scenario got = load(import_hf(hf_file("llama-2-70b.json"), o));
  const scenario::Scenario want = load_file("scenarios/llm/llama2-70b-1024-zbh1.pbtxt");
  expect_same_llm(got.model().llm(), want.model().llm());
  EXPECT_EQ(got.parallel().tp(), want.parallel().tp());
  EXPECT_EQ(got.parallel().pp(), want.parallel().pp());
  EXPECT_EQ(got.parallel().cp(), want.parallel().cp());
  EXPECT_EQ(got.parallel().dp(), want.parallel().dp());  // 1024 GPUs / 64, derived
  EXPECT_EQ(got.parallel().sequence_parallel(), want.parallel().sequence_parallel());
  EXPECT_EQ(got.training().global_batch(), want.training().global_batch());
  EXPECT_EQ(got.training().micro_batch(), want.training().micro_batch());
  expect_same(got.cluster(), want.cluster());
}

TEST(ImportHf, Mixtral8x7bMatchesTheHandWrittenScenario) {
  HfOptions o;
  opt(o.layout, &LayoutOptions::tp, 2);
  opt(o.layout, &LayoutOptions::pp, 2);
  opt(o.layout, &LayoutOptions::ep, 4);
  opt(o.layout, &LayoutOptions::expert_tp, 1);
  opt(o.layout, &LayoutOptions::num_nodes, 2);
  opt(o.layout, &LayoutOptions::global_batch, 64);
  o.layout.sequence_parallel.set(true, "test");
  const scenario::Scenario got = load(import_hf(hf_file("mixtral-8x7b.json"), o));
  const scenario::Scenario want = load_file("tests/data/hf/mixtral-8x7b.expected.pbtxt");
  expect_same_llm(got.model().llm(), want.model().llm());
  scenario::ParallelPlan gp = got.parallel(), wp = want.parallel();
  gp.clear_rank_order();  // "" and "tp-cp-dp-pp" are the same order
  wp.clear_rank_order();
  expect_same(gp, wp);
  expect_same(got.training(), want.training());
  expect_same(got.schedule(), want.schedule());
  expect_same(got.cluster(), want.cluster());
}

TEST(ImportHf, EveryFieldHasItsSource) {
  const Annotated a = import_hf(hf_file("llama-3-8b.json"), HfOptions{});
  const std::string text = write_annotated(a);
  std::istringstream lines(text);
  std::string line;
  int fields = 0;
  while (std::getline(lines, line)) {
    if (line.empty() || line.find('#') == 0 || line.find('{') != std::string::npos || line.find('}') != std::string::npos)
      continue;
    if (line.find_first_not_of(' ') != std::string::npos && line[line.find_first_not_of(' ')] == '#') continue;
    ++fields;
    EXPECT_NE(line.find("  # "), std::string::npos) << "no source comment: " << line;
  }
  EXPECT_GT(fields, 20);
  EXPECT_NE(text.find("num_layers: 32  # llama-3-8b.json: num_hidden_layers"), std::string::npos);
  EXPECT_NE(text.find("default: min(4096, max_position_embeddings = 8192)"), std::string::npos);
}

TEST(ImportHf, WrittenTextParsesBackToTheSameScenario) {
  for (const char* name : {"llama-2-70b.json", "llama-3-8b.json", "mixtral-8x7b.json", "deepseek-v3.json",
                           "qwen3-30b-a3b.json", "qwen1.5-moe-a2.7b.json", "qwen2.5-7b.json", "llava-1.5-7b.json",
                           "qwen2-vl-7b.json", "qwen2.5-vl-7b.json", "qwen3-vl-8b.json"}) {
    SCOPED_TRACE(name);
    HfOptions o;
    opt(o.layout, &LayoutOptions::num_nodes, 2);
    const Annotated a = import_hf(hf_file(name), o);
    const scenario::Scenario back = load(a);
    // The loader adds the preset's cluster and variability: compare the rest.
    scenario::Scenario want = a.spec, got = back;
    want.clear_cluster();
    got.clear_cluster();
    got.clear_variability();
    expect_same(got, want);
  }
}

TEST(ImportHf, DeepseekV3MapsMoeFieldsAndSaysWhatIsApproximated) {
  HfOptions o;
  opt(o.layout, &LayoutOptions::num_nodes, 4);
  opt(o.layout, &LayoutOptions::ep, 32);
  const Annotated a = import_hf(hf_file("deepseek-v3.json"), o);
  const auto& m = a.spec.model().llm();
  EXPECT_EQ(m.num_layers(), 61);
  EXPECT_EQ(m.ffn_hidden_size(), 18432);
  EXPECT_EQ(m.moe().num_experts(), 256);
  EXPECT_EQ(m.moe().top_k(), 8);
  EXPECT_EQ(m.moe().expert_ffn_hidden_size(), 2048);
  EXPECT_EQ(m.moe().shared_expert_ffn_hidden_size(), 1 * 2048);
  EXPECT_EQ(m.moe().first_dense_layers(), 3);
  EXPECT_EQ(a.spec.parallel().ep(), 32);
  const std::string text = write_annotated(a);
  EXPECT_NE(text.find("Multi-head Latent Attention"), std::string::npos);
  EXPECT_NE(text.find("kv_lora_rank 512"), std::string::npos);
  EXPECT_NE(text.find("multi-token-prediction"), std::string::npos);
  (void)load(a);  // `check` accepts it
}

TEST(ImportHf, QwenMoeFamilies) {
  const Annotated q2 = import_hf(hf_file("qwen1.5-moe-a2.7b.json"), HfOptions{});
  EXPECT_EQ(q2.spec.model().llm().moe().num_experts(), 60);
  EXPECT_EQ(q2.spec.model().llm().moe().top_k(), 4);
  EXPECT_EQ(q2.spec.model().llm().moe().expert_ffn_hidden_size(), 1408);
  EXPECT_EQ(q2.spec.model().llm().moe().shared_expert_ffn_hidden_size(), 5632);
  EXPECT_EQ(q2.spec.model().llm().attention_window(), 0);  // use_sliding_window false
  const Annotated q3 = import_hf(hf_file("qwen3-30b-a3b.json"), HfOptions{});
  EXPECT_EQ(q3.spec.model().llm().moe().num_experts(), 128);
  EXPECT_EQ(q3.spec.model().llm().moe().top_k(), 8);
  EXPECT_EQ(q3.spec.model().llm().moe().shared_expert_ffn_hidden_size(), 0);
  // head_dim 128 × 32 heads = 4096 ≠ hidden 2048: said in a comment.
  EXPECT_NE(write_annotated(q3).find("head_dim 128 × 32 heads = 4096 ≠ hidden_size 2048"), std::string::npos);
}

TEST(ImportHf, VisionEncoders) {
  HfOptions o;
  o.encoders = {hf_file("siglip-so400m-patch14-384.json"), hf_file("internvit-6b-448px-v1-5.json"),
                hf_file("vit-base-patch16-224.json")};
  const Annotated a = import_hf(hf_file("llama-3-8b.json"), o);
  ASSERT_EQ(a.spec.model().encoders_size(), 3);
  const auto& siglip = a.spec.model().encoders(0).transformer();
  EXPECT_EQ(siglip.seq_length(), 27 * 27);  // floor(384 / 14)², no class token
  EXPECT_EQ(siglip.hidden_size(), 1152);
  EXPECT_EQ(siglip.num_layers(), 27);
  const auto& intern = a.spec.model().encoders(1).transformer();
  EXPECT_EQ(intern.seq_length(), 32 * 32 + 1);
  EXPECT_EQ(intern.norm(), scenario::RMSNORM);
  EXPECT_FALSE(intern.linear_bias());
  const auto& vit = a.spec.model().encoders(2).transformer();
  EXPECT_EQ(vit.seq_length(), 14 * 14 + 1);
  EXPECT_TRUE(vit.linear_bias());
  EXPECT_TRUE(vit.bidirectional_attention());
  EXPECT_EQ(a.spec.placement().kind(), scenario::MEGATRON_BASELINE);
  (void)load(a);
}

TEST(ImportHf, MultimodalConfigsNestVisionAndText) {
  const Annotated llava = import_hf(hf_file("llava-1.5-7b.json"), HfOptions{});
  // text_config leaves hidden_size & co. to LlamaConfig's defaults.
  EXPECT_EQ(llava.spec.model().llm().hidden_size(), 4096);
  EXPECT_EQ(llava.spec.model().llm().ffn_hidden_size(), 11008);
  EXPECT_EQ(llava.spec.model().llm().vocab_size(), 32064);
  ASSERT_EQ(llava.spec.model().encoders_size(), 1);
  EXPECT_EQ(llava.spec.model().encoders(0).transformer().seq_length(), 24 * 24 + 1);
  EXPECT_EQ(llava.spec.model().encoders(0).transformer().num_layers(), 24);

  const Annotated qwen2vl = import_hf(hf_file("qwen2-vl-7b.json"), HfOptions{});
  EXPECT_EQ(qwen2vl.spec.model().llm().hidden_size(), 3584);
  ASSERT_EQ(qwen2vl.spec.model().encoders_size(), 1);
  EXPECT_EQ(qwen2vl.spec.model().encoders(0).transformer().hidden_size(), 1280);
  EXPECT_EQ(qwen2vl.spec.model().encoders(0).transformer().ffn_hidden_size(), 4 * 1280);
  EXPECT_EQ(qwen2vl.spec.model().encoders(0).projector().token_merge(), 4);

  const Annotated qwen25vl = import_hf(hf_file("qwen2.5-vl-7b.json"), HfOptions{});
  const auto& v25 = qwen25vl.spec.model().encoders(0).transformer();
  EXPECT_EQ(v25.hidden_size(), 1280);
  EXPECT_EQ(v25.ffn_hidden_size(), 3420);
  EXPECT_EQ(v25.activation(), scenario::SWIGLU);
  EXPECT_EQ(v25.norm(), scenario::RMSNORM);
  EXPECT_NE(write_annotated(qwen25vl).find("windowed attention"), std::string::npos);

  const Annotated qwen3vl = import_hf(hf_file("qwen3-vl-8b.json"), HfOptions{});
  EXPECT_EQ(qwen3vl.spec.model().llm().num_layers(), 36);
  EXPECT_EQ(qwen3vl.spec.model().encoders(0).transformer().num_layers(), 27);
  EXPECT_EQ(qwen3vl.spec.model().encoders(0).transformer().seq_length(), 28 * 28);
}

TEST(ImportHf, UnknownArchitectureNamesWhatItCouldAndCouldNotMap) {
  try {
    (void)import_hf(hf_file("unknown-gpt-neox.json"), HfOptions{});
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("unknown architecture \"GPTNeoXForCausalLM\""), std::string::npos) << m;
    EXPECT_NE(m.find("could map: hidden_act, hidden_size, intermediate_size"), std::string::npos) << m;
    EXPECT_NE(m.find("could not map: rotary_emb_base, rotary_pct, use_parallel_residual"), std::string::npos) << m;
    EXPECT_EQ(e.where().field, "architectures");
  }
}

TEST(ImportHf, MissingKeysAreNamedTogether) {
  try {
    (void)import_hf({R"({"architectures": ["Qwen2ForCausalLM"], "hidden_size": 1024})", "cfg.json"}, HfOptions{});
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("num_hidden_layers, num_attention_heads, intermediate_size, vocab_size"), std::string::npos) << m;
  }
  EXPECT_THROW((void)import_hf({"[1, 2]", "cfg.json"}, HfOptions{}), Error);
  EXPECT_THROW((void)import_hf({R"({"architectures": ["LlamaForCausalLM"], "hidden_size": "big"})", "c.json"},
                               HfOptions{}),
               Error);
}

TEST(ImportHf, GpusThatDoNotFillTheLayoutAreAnError) {
  HfOptions o;
  opt(o.layout, &LayoutOptions::tp, 3);
  EXPECT_THROW((void)import_hf(hf_file("llama-3-8b.json"), o), Error);
  HfOptions w;
  w.layout.world_size = 32;
  const Annotated a = import_hf(hf_file("llama-3-8b.json"), w);
  EXPECT_EQ(a.spec.cluster().num_nodes(), 4);
  EXPECT_EQ(a.spec.parallel().dp(), 32);
}

// ---------------------------------------------------------------- Megatron-LM

TEST(ImportMegatron, Gpt3CommandLineMatchesTheShippedScenario) {
  const auto args = split_command_line(slurp(data("tests/data/megatron/gpt3-175b-3072.sh")));
  const Annotated a = import_megatron(args, MegatronOptions{});
  EXPECT_TRUE(a.warnings.empty());
  const scenario::Scenario got = load(a);
  const scenario::Scenario want = load_file("scenarios/llm/gpt3-175b-3072.pbtxt");
  expect_same_llm(got.model().llm(), want.model().llm());
  expect_same(got.parallel(), want.parallel());
  expect_same(got.schedule(), want.schedule());
  EXPECT_EQ(got.training().global_batch(), want.training().global_batch());
  EXPECT_EQ(got.training().micro_batch(), want.training().micro_batch());
  EXPECT_EQ(got.training().precision(), want.training().precision());
  EXPECT_EQ(got.cluster().num_nodes(), want.cluster().num_nodes());
  const std::string text = write_annotated(a);
  EXPECT_NE(text.find("tp: 8  # --tensor-model-parallel-size"), std::string::npos);
  EXPECT_NE(text.find("virtual_stages: 12  # --num-layers-per-virtual-pipeline-stage"), std::string::npos);
  EXPECT_NE(text.find("Ignored (no effect on the simulated step): "), std::string::npos);
}

TEST(ImportMegatron, DefaultsAreMegatronsOwn) {
  const Annotated a = import_megatron({"--num-layers", "4", "--hidden-size", "1024", "--num-attention-heads", "16",
                                       "--seq-length", "1024", "--vocab-size", "50000", "--swiglu"},
                                      MegatronOptions{});
  const auto& m = a.spec.model().llm();
  EXPECT_EQ(m.ffn_hidden_size(), (4 * 1024 * 2 / 3) / 64 * 64);  // 2688
  EXPECT_EQ(m.vocab_size(), 50048);                              // next multiple of 128 × tp 1
  EXPECT_EQ(m.norm(), scenario::LAYERNORM);
  EXPECT_EQ(m.position_embedding(), scenario::Transformer::POSITION_LEARNED);
  EXPECT_TRUE(m.linear_bias());
  EXPECT_DOUBLE_EQ(m.hidden_dropout(), 0.1);
  EXPECT_DOUBLE_EQ(m.attention_dropout(), 0.1);
  EXPECT_EQ(a.spec.training().precision(), scenario::FP32);
  EXPECT_EQ(a.spec.training().global_batch(), a.spec.parallel().dp());  // micro 1 × dp
}

TEST(ImportMegatron, MoeAndFp8Flags) {
  MegatronOptions o;
  o.layout.num_nodes.set(2, "test");
  const Annotated a = import_megatron(
      {"pretrain_gpt.py", "--num-layers", "28", "--hidden-size", "2048", "--num-attention-heads", "16",
       "--group-query-attention", "--num-query-groups", "4", "--seq-length", "4096", "--vocab-size", "151936",
       "--normalization", "RMSNorm", "--position-embedding-type", "rope", "--disable-bias-linear", "--swiglu",
       "--untie-embeddings-and-output-weights", "--num-experts", "64", "--moe-router-topk", "6",
       "--moe-ffn-hidden-size", "1408", "--moe-shared-expert-intermediate-size", "2816", "--moe-layer-freq",
       "([0]*1+[1]*27)", "--moe-token-dispatcher-type", "alltoall", "--moe-grouped-gemm",
       "--expert-model-parallel-size", "8", "--tensor-model-parallel-size", "2", "--bf16", "--fp8-format", "hybrid",
       "--fp8-recipe", "blockwise", "--recompute-granularity", "full", "--recompute-method", "block",
       "--recompute-num-layers", "2", "--hidden-dropout", "0", "--attention-dropout", "0"},
      o);
  const auto& m = a.spec.model().llm();
  EXPECT_EQ(m.num_kv_heads(), 4);
  EXPECT_EQ(m.moe().num_experts(), 64);
  EXPECT_EQ(m.moe().top_k(), 6);
  EXPECT_EQ(m.moe().expert_ffn_hidden_size(), 1408);
  EXPECT_EQ(m.moe().shared_expert_ffn_hidden_size(), 2816);
  EXPECT_EQ(m.moe().first_dense_layers(), 1);
  EXPECT_EQ(m.moe().dispatcher(), scenario::DISPATCHER_ALLTOALL);
  EXPECT_TRUE(m.moe().grouped_gemm());
  EXPECT_EQ(a.spec.parallel().ep(), 8);
  EXPECT_EQ(a.spec.parallel().expert_tp(), 2);  // default: tp
  EXPECT_EQ(a.spec.parallel().dp(), 8);
  EXPECT_EQ(a.spec.parallel().recompute(), scenario::RECOMPUTE_FULL);
  EXPECT_EQ(a.spec.parallel().recompute_num_layers(), 2);
  EXPECT_EQ(a.spec.training().precision(), scenario::FP8);
  EXPECT_EQ(a.spec.training().fp8().recipe(), scenario::FP8_BLOCKWISE);
}

TEST(ImportMegatron, UnknownFlagsAreNamedInAWarningAndAComment) {
  const Annotated a = import_megatron({"--num-layers", "2", "--hidden-size", "256", "--num-attention-heads", "4",
                                       "--seq-length", "128", "--vocab-size", "1000", "--frobnicate", "3",
                                       "--shiny-new-kernel", "--lr", "1e-4"},
                                      MegatronOptions{});
  ASSERT_EQ(a.warnings.size(), 1u);
  EXPECT_NE(a.warnings[0].find("--frobnicate --shiny-new-kernel"), std::string::npos) << a.warnings[0];
  const std::string text = write_annotated(a);
  EXPECT_NE(text.find("# Not mapped (unknown to lacuna's importer"), std::string::npos);
  EXPECT_NE(text.find("Ignored (no effect on the simulated step): --lr"), std::string::npos);
}

TEST(ImportMegatron, MissingModelFlagsAreNamedTogether) {
  try {
    (void)import_megatron({"--num-layers", "2", "--bf16"}, MegatronOptions{});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--hidden-size, --num-attention-heads, --seq-length"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW((void)import_megatron({"--num-layers", "two"}, MegatronOptions{}), Error);
}

TEST(ImportMegatron, SplitsShellScripts) {
  const auto w = split_command_line("# comment\nA=1 python pretrain_gpt.py \\\n  --x 'a b' \"c\" # tail\n--y\n");
  const std::vector<std::string> want = {"A=1", "python", "pretrain_gpt.py", "--x", "a b", "c", "--y"};
  EXPECT_EQ(w, want);
}

}  // namespace
}  // namespace lacuna::importer
