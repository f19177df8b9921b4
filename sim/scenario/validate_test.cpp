// Each validation rule: the message, the field and the line it points at.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/scenario/test_support.h"

namespace lacuna::scenario {
namespace {

using ::testing::HasSubstr;
using testing::error_of;
using testing::line_of;
using testing::read_source;
using testing::replace_once;

const std::string kSmall = "scenarios/llm/gpt-1.3b-8gpu.pbtxt";
const std::string kGpt3 = "scenarios/llm/gpt3-175b-3072.pbtxt";
const std::string kLlama = "scenarios/llm/llama2-70b-1024-zbh1.pbtxt";
const std::string kPtdp = "scenarios/validation/ptdp-01-1.7b.pbtxt";
const std::string kJson = "scenarios/examples/gpt-1.3b-8gpu.json";

struct Case {
  std::string name;
  std::string file;
  std::string from;
  std::string to;
  std::string field;
  std::string message;  // substring of Error::problem()
  std::string located;  // text whose line the error must point at ("" = `to`)

  Case(std::string n, std::string f, std::string a, std::string b, std::string fld, std::string msg,
       std::string loc = {})
      : name(std::move(n)), file(std::move(f)), from(std::move(a)), to(std::move(b)), field(std::move(fld)),
        message(std::move(msg)), located(std::move(loc)) {}
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class ValidationRule : public ::testing::TestWithParam<Case> {};

TEST_P(ValidationRule, ReportsFieldMessageAndLine) {
  const Case& c = GetParam();
  const std::string text = replace_once(read_source(c.file), c.from, c.to);
  const Format format = c.file.ends_with(".json") ? Format::kJson : Format::kText;
  const Error e = error_of(text, format, c.file);
  EXPECT_THAT(e.problem(), HasSubstr(c.message)) << e.what();
  EXPECT_EQ(e.where().field, c.field) << e.what();
  EXPECT_EQ(e.where().file, c.file);
  EXPECT_EQ(e.where().line, line_of(text, c.located.empty() ? c.to : c.located)) << e.what();
  EXPECT_FALSE(e.fix().empty()) << e.what();
}

const Case kCases[] = {
    {"network_oversubscription_below_one", kGpt3, "preset: \"h100-sxm\"\n",
     "preset: \"h100-sxm\"\n  network { tiers { name: \"tor\" children: 32 oversubscription: 0.5 } }\n",
     "cluster.network.tiers[0].oversubscription", "must be ≥ 1", "oversubscription: 0.5"},
    {"network_children_zero", kGpt3, "preset: \"h100-sxm\"\n",
     "preset: \"h100-sxm\"\n  network { tiers { name: \"tor\" children: 0 } }\n",
     "cluster.network.tiers[0].children", "must be a positive integer", "children: 0"},
    {"network_negative_slowdown", kGpt3, "preset: \"h100-sxm\"\n",
     "preset: \"h100-sxm\"\n  network { compute_slowdown_under_comm: -0.2 }\n",
     "cluster.network.compute_slowdown_under_comm", "must be ≥ 0", "compute_slowdown_under_comm"},
    {"tp_divides_heads", kLlama, "tp: 8\n", "tp: 6\n", "parallel.tp", "tp=6 must divide attention heads (64)"},
    {"tp_divides_kv_heads", kLlama, "tp: 8\n", "tp: 16\n", "parallel.tp", "tp=16 must divide kv heads (8)"},
    {"tp_divides_ffn", kSmall, "ffn_hidden_size: 8192", "ffn_hidden_size: 8191", "parallel.tp",
     "tp=2 must divide ffn_hidden_size (8191)", "tp: 2"},
    {"kv_divides_heads", kSmall, "num_kv_heads: 16", "num_kv_heads: 5", "model.llm.num_kv_heads",
     "num_kv_heads 5 must divide num_attention_heads 16"},
    {"heads_divide_hidden", kSmall, "num_attention_heads: 16", "num_attention_heads: 48",
     "model.llm.num_attention_heads", "num_attention_heads 48 must divide hidden_size 2048"},
    {"world_size", kGpt3, "pp: 8\n  dp: 48", "pp: 5\n  dp: 75", "parallel.dp",
     "tp×cp×pp×dp = 3000 but the cluster has 3072 GPUs", "dp: 75"},
    {"batch_multiple", kGpt3, "num_nodes: 384  # × 8 GPUs = 3,072\n}\n\nparallel {\n  tp: 8\n  sequence_parallel: true\n  cp: 1\n  pp: 8\n  dp: 48",
     "num_nodes: 320\n}\n\nparallel {\n  tp: 8\n  sequence_parallel: true\n  cp: 1\n  pp: 8\n  dp: 40",
     "training.global_batch", "global_batch 1536 is not a multiple of micro_batch × dp (2 × 40)",
     "global_batch: 1536"},
    {"interleaved_microbatches", kGpt3, "global_batch: 1536", "global_batch: 1632", "training.global_batch",
     "= 17) to be a multiple of pp (8)"},
    {"interleaved_needs_chunks", kGpt3, "virtual_stages: 12", "virtual_stages: 1", "parallel.virtual_stages",
     "INTERLEAVED_1F1B needs virtual_stages ≥ 2, got 1"},
    {"uneven_layers", kGpt3, "virtual_stages: 12", "virtual_stages: 5", "parallel.virtual_stages",
     "num_layers 96 is not divisible by pp × virtual_stages (8 × 5 = 40)"},
    {"zero_virtual_stages", kSmall, "virtual_stages: 1", "virtual_stages: 0", "parallel.virtual_stages",
     "must be a positive integer, got 0"},
    {"one_f_one_b_single_chunk", kSmall, "virtual_stages: 1", "virtual_stages: 2", "parallel.virtual_stages",
     "ONE_F_ONE_B needs virtual_stages = 1, got 2"},
    {"zb_h1_single_chunk", kLlama, "virtual_stages: 1", "virtual_stages: 2", "parallel.virtual_stages",
     "ZB_H1 runs one model chunk per pipeline rank"},
    {"layers_per_stage_count", kSmall, "virtual_stages: 1", "virtual_stages: 1\n  layers_per_stage: [24]",
     "parallel.layers_per_stage", "has 1 entries but pp × virtual_stages = 2", "layers_per_stage"},
    {"layers_per_stage_sum", kSmall, "virtual_stages: 1", "virtual_stages: 1\n  layers_per_stage: [12, 11]",
     "parallel.layers_per_stage", "sums to 23 but num_layers is 24", "layers_per_stage"},
    {"layers_per_stage_entry", kSmall, "virtual_stages: 1",
     "virtual_stages: 1\n  layers_per_stage: 24\n  layers_per_stage: 0", "parallel.layers_per_stage[1]",
     "must be between 1 and num_layers (24), got 0", "layers_per_stage: 0"},
    {"sequence_parallel_needs_tp", kSmall, "tp: 2", "tp: 1", "parallel.sequence_parallel",
     "sequence_parallel needs tp > 1", "sequence_parallel: true"},
    {"rank_order", kSmall, "rank_order: \"tp-cp-dp-pp\"", "rank_order: \"tp-dp-pp\"", "parallel.rank_order",
     "must name each of tp, cp, dp and pp once"},
    {"rank_order_duplicate", kSmall, "rank_order: \"tp-cp-dp-pp\"", "rank_order: \"tp-tp-dp-pp\"",
     "parallel.rank_order", "must name each of tp, cp, dp and pp once"},
    {"activation_unspecified", kSmall, "activation: GELU", "activation: ACTIVATION_UNSPECIFIED",
     "model.llm.activation", "is not set"},
    {"hidden_dropout_one", kPtdp, "hidden_dropout: 0.1", "hidden_dropout: 1", "model.llm.hidden_dropout",
     "hidden_dropout must be a probability in [0, 1), got 1"},
    {"attention_dropout_negative", kPtdp, "attention_dropout: 0.1", "attention_dropout: -0.1",
     "model.llm.attention_dropout", "attention_dropout must be a probability in [0, 1), got -0.1"},
    {"attention_dropout_nan", kSmall, "linear_bias: true", "linear_bias: true\n    attention_dropout: nan",
     "model.llm.attention_dropout", "must be a probability in [0, 1), got nan", "attention_dropout: nan"},
    {"position_embedding_unset", kSmall, "    position_embedding: POSITION_LEARNED\n", "",
     "model.llm.position_embedding", "position_embedding is not set", "llm {"},
    {"position_embedding_unspecified", kLlama, "position_embedding: POSITION_ROTARY",
     "position_embedding: POSITION_UNSPECIFIED", "model.llm.position_embedding", "position_embedding is not set"},
    {"position_embedding_number", kSmall, "position_embedding: POSITION_LEARNED", "position_embedding: 9",
     "model.llm.position_embedding", "has no value 9"},
    {"json_position_embedding_unset", kJson, ",\n      \"positionEmbedding\": \"POSITION_LEARNED\"", "",
     "model.llm.position_embedding", "position_embedding is not set", "\"llm\": {"},
    {"attention_kernel_number", kSmall, "linear_bias: true", "linear_bias: true\n    attention_kernel: 7",
     "model.llm.attention_kernel", "has no value 7", "attention_kernel: 7"},
    {"fp8_on_a100", kPtdp, "precision: FP16", "precision: FP8", "training.precision",
     "precision FP8 is not supported by the GPU of preset \"a100-80gb-sxm\""},
    {"efficiency_range", kSmall, "num_nodes: 1", "num_nodes: 1\n  gpu { efficiency { key: \"GEMM\" value { flops: 1.5 } } }",
     "cluster.gpu.efficiency[GEMM].flops", "must be in [0.001, 1]", "gpu {"},
    // Issue 16: rates so small that every derived duration overflows int64 ns.
    {"tiny_peak", kSmall, "num_nodes: 1", "num_nodes: 1\n  gpu { peak_bf16_tflops: 1e-12 }",
     "cluster.gpu.peak_bf16_tflops", "1e-12 TFLOP/s is below the supported minimum 0.001 TFLOP/s", "gpu {"},
    {"tiny_nvlink", kSmall, "num_nodes: 1", "num_nodes: 1\n  nvlink { bandwidth_gb_per_s: 1e-9 }",
     "cluster.nvlink.bandwidth_gb_per_s", "is below the supported minimum 0.001 GB/s", "nvlink {"},
    {"tiny_efficiency", kSmall, "num_nodes: 1", "num_nodes: 1\n  gpu { efficiency { key: \"GEMM\" value { flops: 1e-300 } } }",
     "cluster.gpu.efficiency[GEMM].flops", "must be in [0.001, 1]", "gpu {"},
    {"efficiency_key", kSmall, "num_nodes: 1", "num_nodes: 1\n  gpu {\n    efficiency { key: \"GEMMM\" value { flops: 0.5 } }\n  }",
     "cluster.gpu.efficiency[GEMMM]", "\"GEMMM\" is not an op class", "efficiency {"},
    {"zero_layers", kSmall, "num_layers: 24", "num_layers: 0", "model.llm.num_layers", "must be a positive integer, got 0"},
    {"negative_hidden", kSmall, "hidden_size: 2048", "hidden_size: -1", "model.llm.hidden_size",
     "must be a positive integer, got -1"},
    {"absurd_layers", kSmall, "num_layers: 24", "num_layers: 4611686018427387904", "model.llm.num_layers",
     "4611686018427387904 is above the supported maximum 100000"},
    {"absurd_vocab", kSmall, "vocab_size: 51200", "vocab_size: 1000000000", "model.llm.vocab_size",
     "above the supported maximum 100000000"},
    {"program_size", kSmall, "global_batch: 32", "global_batch: 40000000", "training.global_batch",
     "ops per pipeline rank"},
    {"gpus_per_node", kSmall, "num_nodes: 1", "num_nodes: 1\n  gpus_per_node: 65", "cluster.gpus_per_node",
     "65 is above the supported maximum 64", "gpus_per_node: 65"},
    {"negative_bandwidth", kSmall, "num_nodes: 1", "num_nodes: 1\n  nic { bandwidth_gb_per_s: -1 }",
     "cluster.nic.bandwidth_gb_per_s", "must be > 0, got -1", "nic {"},
    {"nan_latency", kSmall, "num_nodes: 1", "num_nodes: 1\n  nvlink { latency_us: nan }", "cluster.nvlink.latency_us",
     "must be a finite number", "nvlink {"},
    {"unknown_preset", kSmall, "preset: \"h100-sxm\"", "preset: \"h100\"", "cluster.preset",
     "unknown hardware preset \"h100\""},
    {"num_nodes_missing", kSmall, "  num_nodes: 1\n", "", "cluster.num_nodes", "is not set", "cluster {"},
    {"missing_no_preset", "scenarios/hardware/h100-node-no-preset.pbtxt", "latency_us: 2.7 ", "",
     "cluster.nic.latency_us", "is not set", "nic {"},
    // JSON: the same rules, located through the JSON scanner.
    {"json_tp", kJson, "\"tp\": 2,", "\"tp\": 6,", "parallel.tp", "tp=6 must divide attention heads (16)"},
    {"json_zero_layers", kJson, "\"numLayers\": 24", "\"num_layers\": 0", "model.llm.num_layers",
     "must be a positive integer, got 0"},
    {"json_world", kJson, "\"dp\": 2,", "\"dp\": 3,", "parallel.dp",
     "tp×cp×pp×dp = 12 but the cluster has 8 GPUs"},
    {"json_batch", kJson, "\"globalBatch\": 32", "\"globalBatch\": 30", "training.global_batch",
     "global_batch 30 is not a multiple of micro_batch × dp (2 × 2)"},
    {"json_efficiency", kJson, "\"numNodes\": 1", "\"numNodes\": 1, \"gpu\": {\n\"efficiency\": {\"GEMM\": {\n\"flops\": 2}}}",
     "cluster.gpu.efficiency[GEMM].flops", "must be in [0.001, 1]", "\"flops\": 2"},
    {"json_schedule", kJson, "\"kind\": \"ONE_F_ONE_B\"", "\"kind\": \"SCHEDULE_UNSPECIFIED\"", "schedule.kind",
     "is not set"},
};

INSTANTIATE_TEST_SUITE_P(Scenario, ValidationRule, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return info.param.name; });

// (A missing schedule section now takes its documented default,
// docs/scenario.md#defaults; a missing training section has no default.)
TEST(Validation, MissingSectionIsReportedWithoutALine) {
  const std::string text = replace_once(
      read_source(kSmall), "training {\n  global_batch: 32\n  micro_batch: 2\n  precision: BF16\n}\n", "");
  const Error all = error_of(text, Format::kText);
  // Every field of the section without a default is reported, unlocated, in
  // field order (micro_batch takes its documented default).
  ASSERT_EQ(all.parts().size(), 2u) << all.what();
  const Error& e = all.parts()[0];
  EXPECT_EQ(e.where().field, "training.global_batch");
  EXPECT_EQ(e.where().line, 0);
  EXPECT_THAT(e.fix(), HasSubstr("at least 1"));
  EXPECT_EQ(all.parts()[1].where().field, "training.precision");
}

TEST(Validation, UnsetPositionEmbeddingListsTheChoices) {
  const std::string text =
      replace_once(read_source(kGpt3), "position_embedding: POSITION_LEARNED", "position_embedding: POSITION_UNSPECIFIED");
  const Error e = error_of(text, Format::kText, "gpt3.pbtxt");
  EXPECT_THAT(e.fix(), HasSubstr("POSITION_LEARNED, POSITION_ROTARY, POSITION_NONE"));
  EXPECT_THAT(e.fix(), HasSubstr("POSITION_LEARNED for GPT-2/3-style models, POSITION_ROTARY for Llama-style"));
  EXPECT_THAT(std::string(e.what()),
              HasSubstr("gpt3.pbtxt:" + std::to_string(line_of(text, "position_embedding: POSITION_UNSPECIFIED"))));
  EXPECT_THAT(std::string(e.what()), HasSubstr("model.llm.position_embedding"));
}

TEST(Validation, FormattedMessageNamesFileLineAndField) {
  const std::string text = replace_once(read_source(kLlama), "tp: 8\n", "tp: 6\n");
  const Error e = error_of(text, Format::kText, "llama.pbtxt");
  EXPECT_THAT(std::string(e.what()),
              HasSubstr("llama.pbtxt:" + std::to_string(line_of(text, "tp: 6")) + ":3: parallel.tp: tp=6"));
}

TEST(Validation, ContextParallelNeedsTwoChunksPerRank) {
  std::string text = replace_once(read_source(kSmall), "seq_length: 2048", "seq_length: 2046");
  text = replace_once(text, "cp: 1\n  pp: 2\n  dp: 2", "cp: 2\n  pp: 2\n  dp: 1");
  const Error e = error_of(text, Format::kText);
  EXPECT_THAT(e.problem(), HasSubstr("seq_length 2046 must be divisible by 2 × cp = 4"));
  EXPECT_EQ(e.where().field, "parallel.cp");
  EXPECT_EQ(e.where().line, line_of(text, "cp: 2"));
}

TEST(Validation, SequenceParallelNeedsTokensDivisibleByTp) {
  std::string text = replace_once(read_source(kSmall), "seq_length: 2048", "seq_length: 2047");
  const Error e = error_of(text, Format::kText);
  EXPECT_EQ(e.where().field, "parallel.sequence_parallel");
  EXPECT_THAT(e.problem(), HasSubstr("2047 tokens per CP rank over tp=2"));
}

TEST(Validation, InterleavedNeedsPipeline) {
  std::string text = replace_once(read_source(kSmall), "kind: ONE_F_ONE_B", "kind: INTERLEAVED_1F1B");
  text = replace_once(text, "pp: 2\n  dp: 2\n  virtual_stages: 1", "pp: 1\n  dp: 4\n  virtual_stages: 2");
  const Error e = error_of(text, Format::kText);
  EXPECT_THAT(e.problem(), HasSubstr("INTERLEAVED_1F1B needs pp ≥ 2"));
}

// Issue 16: 10^5 layers over pp 100 stayed under the per-rank bound, passed
// validation, then died of bad_alloc after 65 s and 7.7 GB.
TEST(Validation, AProgramTooLargeInAllIsRefusedUpFront) {
  std::string text = replace_once(read_source(kSmall), "num_layers: 24", "num_layers: 100000");
  text = replace_once(text, "num_nodes: 1", "num_nodes: 50");
  text = replace_once(text, "pp: 2\n  dp: 2", "pp: 100\n  dp: 2");
  text = replace_once(text, "global_batch: 32", "global_batch: 200");
  const Error e = error_of(text, Format::kText);
  EXPECT_EQ(e.where().field, "model.llm.num_layers");
  EXPECT_THAT(e.problem(), HasSubstr("ops in all (50 microbatches × 100000 layers × ~60)"));
  EXPECT_EQ(e.where().line, line_of(text, "num_layers: 100000"));
}

TEST(Validation, ValidScenarioPassesValidateScenarioDirectly) {
  const auto loaded = load_scenario(testing::source_path(kGpt3));
  EXPECT_NO_THROW(validate_scenario(loaded.spec, SourceMap{}));
  Scenario broken = loaded.spec;
  broken.mutable_parallel()->set_tp(0);
  EXPECT_THROW(validate_scenario(broken, SourceMap{}), Error);
}

}  // namespace
}  // namespace lacuna::scenario
