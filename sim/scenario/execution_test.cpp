// Execution semantics (sim/scenario/execution.{h,cpp}): each software preset
// resolves to the switches of docs/scenario.md#execution, the scenario's own
// switches override them, resolving is idempotent, and every combination
// Megatron-LM rejects is an error naming file, line and field.
#include "sim/scenario/execution.h"

#include <gmock/gmock.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <cctype>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "sim/scenario/test_support.h"

namespace lacuna::scenario {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::error_of;
using testing::line_of;
using testing::replace_once;

// A small valid scenario: 8 layers on one 8-GPU node, TP 2 + SP × PP 2 × DP 2,
// 1F1B, 4 microbatches of 2 × 1024 tokens.
const std::string kFile = "exec.pbtxt";
const std::string kBase = R"(name: "exec-test"
model {
  llm {
    name: "gpt-small"
    num_layers: 8
    hidden_size: 1024
    num_attention_heads: 16
    num_kv_heads: 16
    ffn_hidden_size: 4096
    activation: GELU
    norm: LAYERNORM
    vocab_size: 32000
    seq_length: 1024
    linear_bias: true
    position_embedding: POSITION_LEARNED
  }
}
cluster {
  preset: "h100-sxm"
  num_nodes: 1
}
parallel {
  tp: 2
  sequence_parallel: true
  cp: 1
  pp: 2
  dp: 2
  virtual_stages: 1
  distributed_optimizer: true
  overlap_grad_reduce: true
  overlap_param_gather: true
}
schedule {
  kind: ONE_F_ONE_B
}
execution {
  software: "megatron-core-0.12"
}
training {
  global_batch: 16
  micro_batch: 2
  precision: BF16
}
)";

// A scenario built in code with only what resolve_execution reads.
Scenario spec_of(const std::string& software, ScheduleKind kind, Precision precision = BF16) {
  Scenario s;
  s.mutable_execution()->set_software(software);
  s.mutable_schedule()->set_kind(kind);
  s.mutable_training()->set_precision(precision);
  return s;
}

Execution resolved(const std::string& software, ScheduleKind kind, Precision precision = BF16) {
  return resolve_execution(spec_of(software, kind, precision), SourceMap{});
}

// ---------------------------------------------------------------- presets

TEST(ExecutionPresets, NamesAreTheFourDocumentedReleasesAndTheDefaultIsOne) {
  EXPECT_THAT(software_preset_names(),
              ElementsAre("megatron-lm-v2.5", "megatron-lm-2022", "megatron-core-0.12", "megascale"));
  EXPECT_STREQ(kDefaultSoftware, "megatron-core-0.12");
}

TEST(ExecutionPresets, EmptySoftwareResolvesToMegatronCore012) {
  for (ScheduleKind kind : {ONE_F_ONE_B, INTERLEAVED_1F1B}) {
    const Execution empty = resolved("", kind);
    const Execution core = resolved("megatron-core-0.12", kind);
    EXPECT_EQ(empty.software(), "megatron-core-0.12");
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(empty, core))
        << empty.DebugString() << "\nvs\n" << core.DebugString();
  }
}

// The table of docs/scenario.md#execution, one row per switch, for bf16.
struct Row {
  const char* software;
  PipelineP2p p2p_interleaved, p2p_other;
  bool scatter_gather, async_reduce, tp_overlap, gaf, timer_sync, nan_check, step_stats;
  BatchBroadcast broadcast;
};

const Row kTable[] = {
    {"megatron-lm-v2.5", P2P_BLOCKING, P2P_BLOCKING, true, false, false, false, true, false, false,
     BROADCAST_TOKENS},
    {"megatron-lm-2022", P2P_BLOCKING, P2P_BLOCKING, true, true, false, true, true, false, false, BROADCAST_TOKENS},
    {"megatron-core-0.12", P2P_OVERLAPPED, P2P_BLOCKING, false, true, false, true, false, true, true,
     BROADCAST_TENSORS_WITH_MASK},
    {"megascale", P2P_OVERLAPPED, P2P_OVERLAPPED, false, true, true, true, false, true, true,
     BROADCAST_TENSORS_WITH_MASK},
};

void PrintTo(const Row& r, std::ostream* os) { *os << r.software; }

class PresetRow : public ::testing::TestWithParam<Row> {};

TEST_P(PresetRow, ResolvesToTheDocumentedSwitches) {
  const Row& r = GetParam();
  for (ScheduleKind kind : {GPIPE, ONE_F_ONE_B, INTERLEAVED_1F1B, ZB_H1}) {
    SCOPED_TRACE(ScheduleKind_Name(kind));
    const Execution x = resolved(r.software, kind);
    EXPECT_EQ(x.software(), r.software);
    // Megatron-core overlaps p2p in the interleaved schedule only.
    EXPECT_EQ(x.pipeline_p2p(), kind == INTERLEAVED_1F1B ? r.p2p_interleaved : r.p2p_other);
    EXPECT_EQ(x.pipeline_scatter_gather(), r.scatter_gather);
    EXPECT_EQ(x.tp_async_grad_reduce(), r.async_reduce);
    EXPECT_EQ(x.tp_comm_overlap(), r.tp_overlap);
    EXPECT_EQ(x.tp_comm_overlap_chunks(), 0);  // Transformer Engine's defaults
    EXPECT_EQ(x.gradient_accumulation_fusion(), r.gaf);
    // The fused kernels are on in every release.
    EXPECT_TRUE(x.bias_gelu_fusion());
    EXPECT_TRUE(x.bias_dropout_fusion());
    EXPECT_TRUE(x.masked_softmax_fusion());
    EXPECT_TRUE(x.fused_layer_norm());
    EXPECT_EQ(x.clip_grad(), 1.0);  // --clip-grad's default in every era
    EXPECT_EQ(x.timer_sync(), r.timer_sync);
    EXPECT_EQ(x.nan_check(), r.nan_check);
    EXPECT_EQ(x.step_stats_sync(), r.step_stats);
    EXPECT_TRUE(x.grad_reduce_in_fp32());  // bf16 forces fp32 gradients
    EXPECT_EQ(x.batch_broadcast(), r.broadcast);
    // Every optional switch is set after resolving.
    EXPECT_TRUE(x.has_pipeline_scatter_gather() && x.has_tp_async_grad_reduce() && x.has_tp_comm_overlap() &&
                x.has_tp_comm_overlap_chunks() && x.has_gradient_accumulation_fusion() && x.has_bias_gelu_fusion() &&
                x.has_bias_dropout_fusion() && x.has_masked_softmax_fusion() && x.has_fused_layer_norm() &&
                x.has_clip_grad() && x.has_timer_sync() && x.has_nan_check() && x.has_step_stats_sync() &&
                x.has_grad_reduce_in_fp32());
  }
}

// A schedule file with model chunks gets the interleaved schedule's p2p
// default (Megatron-LM's only schedule with chunks), one without the other.
TEST_P(PresetRow, ACustomScheduleFollowsItsModelChunks) {
  const Row& r = GetParam();
  for (const int64_t v : {1, 2, 3}) {
    Scenario s = spec_of(r.software, CUSTOM);
    s.mutable_parallel()->set_virtual_stages(v);
    EXPECT_EQ(resolve_execution(s, SourceMap{}).pipeline_p2p(), v > 1 ? r.p2p_interleaved : r.p2p_other) << v;
  }
}

INSTANTIATE_TEST_SUITE_P(Execution, PresetRow, ::testing::ValuesIn(kTable),
                         [](const ::testing::TestParamInfo<Row>& info) {
                           std::string name = info.param.software;
                           for (char& ch : name)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

TEST(ExecutionPresets, Fp16ReducesGradientsInFp16AndSkipsNanChecks) {
  for (const std::string& sw : software_preset_names()) {
    SCOPED_TRACE(sw);
    const Execution x = resolved(sw, ONE_F_ONE_B, FP16);
    EXPECT_FALSE(x.grad_reduce_in_fp32());
    EXPECT_FALSE(x.nan_check());  // "on (off for fp16)"
    // Every precision but fp16 accumulates in fp32.
    for (Precision p : {BF16, FP32, FP8}) EXPECT_TRUE(resolved(sw, ONE_F_ONE_B, p).grad_reduce_in_fp32());
  }
}

TEST(ExecutionPresets, GradientAccumulationFusionFollowsEachEraAndPrecision) {
  // v2.5: does not exist.
  EXPECT_FALSE(resolved("megatron-lm-v2.5", ONE_F_ONE_B, BF16).gradient_accumulation_fusion());
  EXPECT_FALSE(resolved("megatron-lm-v2.5", ONE_F_ONE_B, FP16).gradient_accumulation_fusion());
  // 2022: only with fp32 gradients (bf16 yes, fp16 no).
  EXPECT_TRUE(resolved("megatron-lm-2022", ONE_F_ONE_B, BF16).gradient_accumulation_fusion());
  EXPECT_FALSE(resolved("megatron-lm-2022", ONE_F_ONE_B, FP16).gradient_accumulation_fusion());
  // Megatron-core and MegaScale: on.
  EXPECT_TRUE(resolved("megatron-core-0.12", ONE_F_ONE_B, FP16).gradient_accumulation_fusion());
  EXPECT_TRUE(resolved("megascale", ONE_F_ONE_B, FP16).gradient_accumulation_fusion());
}

// ---------------------------------------------------------------- overrides

TEST(ExecutionOverrides, EverySwitchTheScenarioSetsWinsOverThePreset) {
  for (const Row& r : kTable) {
    SCOPED_TRACE(r.software);
    Scenario spec = spec_of(r.software, INTERLEAVED_1F1B);
    Execution& x = *spec.mutable_execution();
    // The opposite of every preset default.
    x.set_pipeline_p2p(r.p2p_interleaved == P2P_BLOCKING ? P2P_OVERLAPPED : P2P_BLOCKING);
    x.set_pipeline_scatter_gather(!r.scatter_gather);
    x.set_tp_async_grad_reduce(!r.async_reduce);
    x.set_tp_comm_overlap(!r.tp_overlap);
    x.set_tp_comm_overlap_chunks(8);
    x.set_gradient_accumulation_fusion(!r.gaf);
    x.set_bias_gelu_fusion(false);
    x.set_bias_dropout_fusion(false);
    x.set_masked_softmax_fusion(false);
    x.set_fused_layer_norm(false);
    x.set_clip_grad(0);
    x.set_timer_sync(!r.timer_sync);
    x.set_nan_check(!r.nan_check);
    x.set_step_stats_sync(!r.step_stats);
    x.set_grad_reduce_in_fp32(false);
    x.set_batch_broadcast(BROADCAST_NONE);
    const Execution out = resolve_execution(spec, SourceMap{});
    EXPECT_EQ(out.pipeline_p2p(), x.pipeline_p2p());
    EXPECT_EQ(out.pipeline_scatter_gather(), !r.scatter_gather);
    EXPECT_EQ(out.tp_async_grad_reduce(), !r.async_reduce);
    EXPECT_EQ(out.tp_comm_overlap(), !r.tp_overlap);
    EXPECT_EQ(out.tp_comm_overlap_chunks(), 8);
    EXPECT_EQ(out.gradient_accumulation_fusion(), !r.gaf);
    EXPECT_FALSE(out.bias_gelu_fusion());
    EXPECT_FALSE(out.bias_dropout_fusion());
    EXPECT_FALSE(out.masked_softmax_fusion());
    EXPECT_FALSE(out.fused_layer_norm());
    EXPECT_TRUE(out.has_clip_grad());
    EXPECT_EQ(out.clip_grad(), 0.0);
    EXPECT_EQ(out.timer_sync(), !r.timer_sync);
    EXPECT_EQ(out.nan_check(), !r.nan_check);
    EXPECT_EQ(out.step_stats_sync(), !r.step_stats);
    EXPECT_FALSE(out.grad_reduce_in_fp32());
    EXPECT_EQ(out.batch_broadcast(), BROADCAST_NONE);
  }
}

TEST(ExecutionOverrides, GradientAccumulationFusionFollowsTheResolvedGradientPrecision) {
  // Megatron-LM 2022 keeps the fusion only with fp32 gradients: the
  // scenario's own grad_reduce_in_fp32 decides, not the training precision.
  Scenario bf16 = spec_of("megatron-lm-2022", ONE_F_ONE_B, BF16);
  bf16.mutable_execution()->set_grad_reduce_in_fp32(false);
  EXPECT_FALSE(resolve_execution(bf16, SourceMap{}).gradient_accumulation_fusion());
  Scenario fp16 = spec_of("megatron-lm-2022", ONE_F_ONE_B, FP16);
  fp16.mutable_execution()->set_grad_reduce_in_fp32(true);
  EXPECT_TRUE(resolve_execution(fp16, SourceMap{}).gradient_accumulation_fusion());
}

TEST(ExecutionOverrides, ASwitchSetInTheFileOverridesThePreset) {
  // Through the loader: an explicit switch in the file, the rest from the preset.
  const std::string text =
      replace_once(kBase, "software: \"megatron-core-0.12\"",
                   "software: \"megatron-lm-v2.5\"\n  timer_sync: false\n  bias_gelu_fusion: false");
  const LoadedScenario ls = parse_scenario(text, Format::kText, kFile);
  const Execution x = resolve_execution(ls.spec, ls.locations);
  EXPECT_FALSE(x.timer_sync());
  EXPECT_FALSE(x.bias_gelu_fusion());
  EXPECT_TRUE(x.bias_dropout_fusion());
  EXPECT_EQ(x.pipeline_p2p(), P2P_BLOCKING);
  EXPECT_EQ(x.batch_broadcast(), BROADCAST_TOKENS);
}

// ---------------------------------------------------------------- idempotence

TEST(ExecutionResolve, IsIdempotent) {
  for (const std::string& sw : software_preset_names())
    for (ScheduleKind kind : {GPIPE, ONE_F_ONE_B, INTERLEAVED_1F1B, ZB_H1})
      for (Precision p : {BF16, FP16, FP8}) {
        SCOPED_TRACE(sw + " " + ScheduleKind_Name(kind) + " " + Precision_Name(p));
        Scenario spec = spec_of(sw, kind, p);
        const Execution once = resolve_execution(spec, SourceMap{});
        *spec.mutable_execution() = once;
        const Execution twice = resolve_execution(spec, SourceMap{});
        EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(once, twice))
            << once.DebugString() << "\nvs\n" << twice.DebugString();
      }
}

// ---------------------------------------------------------------- unknown software

TEST(ExecutionResolve, UnknownSoftwareIsLocatedAtExecutionSoftware) {
  const std::string text =
      replace_once(kBase, "software: \"megatron-core-0.12\"", "software: \"megatron-lm-v3\"");
  const Error e = error_of(text, Format::kText, kFile);
  EXPECT_EQ(e.where().field, "execution.software");
  EXPECT_EQ(e.where().file, kFile);
  EXPECT_EQ(e.where().line, line_of(text, "software: \"megatron-lm-v3\""));
  EXPECT_THAT(e.problem(), HasSubstr("unknown software \"megatron-lm-v3\""));
  // The fix lists every preset.
  for (const std::string& sw : software_preset_names()) EXPECT_THAT(e.fix(), HasSubstr("\"" + sw + "\""));
}

TEST(ExecutionResolve, UnknownSoftwareThrowsFromResolveItself) {
  SourceMap where;
  where.set_file("x.pbtxt");
  where.add("execution.software", 7, 3);
  try {
    resolve_execution(spec_of("megatron-9000", ONE_F_ONE_B), where);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.where().field, "execution.software");
    EXPECT_EQ(e.where().file, "x.pbtxt");
    EXPECT_EQ(e.where().line, 7);
    EXPECT_EQ(e.where().column, 3);
  }
}

// ---------------------------------------------------------------- rejections

struct Reject {
  std::string name;
  std::vector<std::pair<std::string, std::string>> edits;  // replace_once on kBase, in order
  std::string field;
  std::string message;  // substring of Error::problem()
  std::string located;  // text whose line the error points at
};

void PrintTo(const Reject& r, std::ostream* os) { *os << r.name; }

class ExecutionRejection : public ::testing::TestWithParam<Reject> {};

TEST_P(ExecutionRejection, NamesFileLineAndField) {
  const Reject& r = GetParam();
  std::string text = kBase;
  for (const auto& [from, to] : r.edits) text = replace_once(text, from, to);
  const Error e = error_of(text, Format::kText, kFile);
  EXPECT_EQ(e.where().field, r.field) << e.what();
  EXPECT_EQ(e.where().file, kFile) << e.what();
  EXPECT_EQ(e.where().line, line_of(text, r.located)) << e.what();
  EXPECT_GT(e.where().column, 0) << e.what();
  EXPECT_THAT(e.problem(), HasSubstr(r.message)) << e.what();
  EXPECT_FALSE(e.fix().empty()) << e.what();
}

const std::string kSoftware = "software: \"megatron-core-0.12\"";
const std::pair<std::string, std::string> kNoSp{"sequence_parallel: true", "sequence_parallel: false"};
// Interleaved with 2 model chunks per rank (8 layers / (2 × 2), m = 4).
const std::pair<std::string, std::string> kInterleaved{"kind: ONE_F_ONE_B", "kind: INTERLEAVED_1F1B"};
const std::pair<std::string, std::string> kTwoChunks{"virtual_stages: 1", "virtual_stages: 2"};

const Reject kRejections[] = {
    {"tp_overlap_without_sp",
     {kNoSp, {kSoftware, kSoftware + "\n  tp_comm_overlap: true"}},
     "execution.tp_comm_overlap",
     "TP communication overlap needs sequence parallelism",
     "tp_comm_overlap: true"},
    // MegaScale's preset turns the overlap on: the resolved switch is checked,
    // located where the file could set it (the execution block).
    {"megascale_default_overlap_without_sp",
     {kNoSp, {kSoftware, "software: \"megascale\""}},
     "execution.tp_comm_overlap",
     "needs sequence parallelism",
     "execution {"},
    {"overlap_chunks_do_not_divide_tokens",
     {{kSoftware, kSoftware + "\n  tp_comm_overlap: true\n  tp_comm_overlap_chunks: 3"}},
     "execution.tp_comm_overlap_chunks",
     "the 2048 tokens of a microbatch (micro_batch × seq_length / cp) do not split into 3 GEMM pieces",
     "tp_comm_overlap_chunks: 3"},
    // Default pieces: tp for the all-gathers, 4 for the reduce-scatters;
    // 1 × 1026 tokens split into tp = 2 but not into 4.
    {"overlap_default_pieces_do_not_divide_tokens",
     {{"seq_length: 1024", "seq_length: 1026"},
      {"micro_batch: 2", "micro_batch: 1"},
      {"global_batch: 16", "global_batch: 8"},
      {kSoftware, kSoftware + "\n  tp_comm_overlap: true"}},
     "execution.tp_comm_overlap",
     "the 1026 tokens of a microbatch (micro_batch × seq_length / cp) do not split into 4 GEMM pieces",
     "tp_comm_overlap: true"},
    {"overlap_chunks_negative",
     {{kSoftware, kSoftware + "\n  tp_comm_overlap_chunks: -2"}},
     "execution.tp_comm_overlap_chunks",
     "must be a positive integer, got -2",
     "tp_comm_overlap_chunks: -2"},
    {"overlap_chunks_above_64",
     {{kSoftware, kSoftware + "\n  tp_comm_overlap_chunks: 65"}},
     "execution.tp_comm_overlap_chunks",
     "65 is above the supported maximum 64",
     "tp_comm_overlap_chunks: 65"},
    {"clip_grad_negative",
     {{kSoftware, kSoftware + "\n  clip_grad: -0.5"}},
     "execution.clip_grad",
     "must be ≥ 0, got -0.5",
     "clip_grad: -0.5"},
    {"clip_grad_infinite",
     {{kSoftware, kSoftware + "\n  clip_grad: inf"}},
     "execution.clip_grad",
     "must be a finite number",
     "clip_grad: inf"},
    {"clip_grad_huge",
     {{kSoftware, kSoftware + "\n  clip_grad: 2e9"}},
     "execution.clip_grad",
     "is above the supported maximum",
     "clip_grad: 2e9"},
    // v2.5 (blocking p2p by default) asserted pp > 2 for every interleaved run.
    {"interleaved_blocking_pp2_v25",
     {kInterleaved, kTwoChunks, {kSoftware, "software: \"megatron-lm-v2.5\""}},
     "schedule.kind",
     "Megatron-LM rejects the interleaved schedule with blocking pipeline p2p at pp ≤ 2 (pp is 2)",
     "kind: INTERLEAVED_1F1B"},
    {"interleaved_explicit_blocking_pp2_core",
     {kInterleaved, kTwoChunks, {kSoftware, kSoftware + "\n  pipeline_p2p: P2P_BLOCKING"}},
     "schedule.kind",
     "at pp ≤ 2 (pp is 2)",
     "kind: INTERLEAVED_1F1B"},
    {"overlap_param_gather_without_distributed_optimizer",
     {{"distributed_optimizer: true", "distributed_optimizer: false"}},
     "parallel.overlap_param_gather",
     "overlapping the parameter all-gather needs the distributed optimizer",
     "overlap_param_gather: true"},
    {"overlap_param_gather_without_overlap_grad_reduce",
     {{"overlap_grad_reduce: true", "overlap_grad_reduce: false"}},
     "parallel.overlap_param_gather",
     "Megatron-LM rejects --overlap-param-gather without --overlap-grad-reduce",
     "overlap_param_gather: true"},
    {"attention_window_negative",
     {{"seq_length: 1024", "seq_length: 1024\n    attention_window: -1"}},
     "model.llm.attention_window",
     "must be ≥ 0, got -1",
     "attention_window: -1"},
    // cp 2: tp 2 × cp 2 × pp 2 × dp 1 on the 8 GPUs.
    {"attention_window_with_context_parallel",
     {{"seq_length: 1024", "seq_length: 1024\n    attention_window: 256"}, {"cp: 1", "cp: 2"}, {"dp: 2", "dp: 1"}},
     "model.llm.attention_window",
     "sliding-window attention with context parallelism is not modelled",
     "attention_window: 256"},
    {"attention_window_with_unfused_attention",
     {{"seq_length: 1024", "seq_length: 1024\n    attention_window: 256\n    attention_kernel: ATTENTION_UNFUSED"}},
     "model.llm.attention_window",
     "a window saves no work there",
     "attention_window: 256"},
    {"attention_window_with_bidirectional_attention",
     {{"seq_length: 1024", "seq_length: 1024\n    attention_window: 256\n    bidirectional_attention: true"}},
     "model.llm.attention_window",
     "modelled for causal attention only",
     "attention_window: 256"},
};

INSTANTIATE_TEST_SUITE_P(Execution, ExecutionRejection, ::testing::ValuesIn(kRejections),
                         [](const ::testing::TestParamInfo<Reject>& info) { return info.param.name; });

// The rules reject only what they name: the neighbouring valid combinations load.
TEST(ExecutionRules, NeighbouringValidCombinationsLoad) {
  const std::vector<std::vector<std::pair<std::string, std::string>>> valid = {
      {},
      // Interleaved at pp = 2 with Megatron-core's default (overlapped) p2p.
      {kInterleaved, kTwoChunks},
      // TP overlap with SP, default pieces: 2048 tokens split into 2 and 4.
      {{kSoftware, kSoftware + "\n  tp_comm_overlap: true"}},
      {{kSoftware, "software: \"megascale\""}},
      {{kSoftware, kSoftware + "\n  tp_comm_overlap: true\n  tp_comm_overlap_chunks: 64"}},
      {{kSoftware, kSoftware + "\n  clip_grad: 0"}},
      // Neither overlap: the distributed optimizer is optional.
      {{"distributed_optimizer: true", "distributed_optimizer: false"},
       {"overlap_param_gather: true", "overlap_param_gather: false"}},
      // A window with the fused attention, and one wider than the sequence.
      {{"seq_length: 1024", "seq_length: 1024\n    attention_window: 256"}},
      {{"seq_length: 1024", "seq_length: 1024\n    attention_window: 4096"}},
  };
  for (size_t i = 0; i < valid.size(); ++i) {
    std::string text = kBase;
    for (const auto& [from, to] : valid[i]) text = replace_once(text, from, to);
    EXPECT_NO_THROW(parse_scenario(text, Format::kText, kFile)) << "case " << i << ":\n" << text;
  }
}

TEST(ExecutionRules, InterleavedBlockingP2pIsAcceptedAbovePp2) {
  // pp = 4: tp 2 × pp 4 × dp 1, 8 microbatches (a multiple of pp), one layer
  // per virtual stage.
  std::string text = kBase;
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           kInterleaved, kTwoChunks, {"pp: 2", "pp: 4"}, {"dp: 2", "dp: 1"}, {kSoftware, "software: \"megatron-lm-v2.5\""}})
    text = replace_once(text, from, to);
  EXPECT_NO_THROW(parse_scenario(text, Format::kText, kFile));
}

// TP overlap at tp = 1 cannot come from a valid file (SP needs tp > 1 and is
// checked first); validate_execution still rejects it on its own.
TEST(ExecutionRules, TpOverlapNeedsTwoTpRanks) {
  const LoadedScenario ls = parse_scenario(kBase, Format::kText, kFile);
  Scenario spec = ls.spec;
  spec.mutable_parallel()->set_tp(1);
  spec.mutable_execution()->set_tp_comm_overlap(true);
  *spec.mutable_execution() = resolve_execution(spec, ls.locations);
  try {
    validate_execution(spec, Checker(ls.locations));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.where().field, "execution.tp_comm_overlap");
    EXPECT_EQ(e.where().file, kFile);
    EXPECT_EQ(e.where().line, line_of(kBase, "execution {"));
    EXPECT_THAT(e.problem(), HasSubstr("TP communication overlap needs tp ≥ 2 (tp is 1)"));
  }
}

// Enum values the file format cannot name reach validation from code (or a
// JSON number): rejected at the field, located at the execution block.
TEST(ExecutionRules, UnknownEnumValuesAreRejected) {
  const LoadedScenario ls = parse_scenario(kBase, Format::kText, kFile);
  for (const std::string field : {"execution.pipeline_p2p", "execution.batch_broadcast"}) {
    SCOPED_TRACE(field);
    Scenario spec = ls.spec;
    if (field == "execution.pipeline_p2p")
      spec.mutable_execution()->set_pipeline_p2p(static_cast<PipelineP2p>(9));
    else
      spec.mutable_execution()->set_batch_broadcast(static_cast<BatchBroadcast>(9));
    try {
      validate_scenario(spec, ls.locations);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.where().field, field);
      EXPECT_EQ(e.where().file, kFile);
      EXPECT_EQ(e.where().line, line_of(kBase, "execution {"));
      EXPECT_THAT(e.problem(), HasSubstr("has no value 9"));
    }
  }
}

}  // namespace
}  // namespace lacuna::scenario
