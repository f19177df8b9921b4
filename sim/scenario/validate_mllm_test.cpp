// Each multimodal validation rule (validate_mllm.cpp): the message, the field
// and the line it points at; and valid multimodal scenarios of every
// placement pass.
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

// A small valid MLLM: a 1.3B-class LLM (TP2 SP × PP2 × DP4 on 16 GPUs) and a
// ViT-L-class encoder (24 layers, h 1024, 256 tokens per image), 2 images per
// sample merged 4:1 → 128 of the 2048 positions. The marker lines
// ("@ENCODER_LAYOUT@", "@PLACEMENT@") are replaced per base below.
const std::string kTemplate = R"(name: "mllm-test"
model {
  llm {
    num_layers: 24
    hidden_size: 2048
    num_attention_heads: 16
    num_kv_heads: 16
    ffn_hidden_size: 8192
    activation: GELU
    norm: LAYERNORM
    vocab_size: 51200
    seq_length: 2048
    position_embedding: POSITION_ROTARY
  }
  encoders {
    transformer {
      name: "vit-a"
      num_layers: 24
      hidden_size: 1024
      num_attention_heads: 16
      ffn_hidden_size: 4096
      seq_length: 256
      bidirectional_attention: true
    }
    images_per_sample: 2
    projector { token_merge: 4 num_layers: 2 }
@ENCODER_LAYOUT@
  }
}
cluster {
  preset: "h100-sxm"
  num_nodes: @NODES@
}
parallel {
  tp: 2
  sequence_parallel: true
  cp: 1
  pp: 2
  dp: 4
  virtual_stages: 1
}
schedule { kind: ONE_F_ONE_B }
training {
  global_batch: 32
  micro_batch: 1
  precision: BF16
}
placement {
  kind: @PLACEMENT@
}
)";

std::string make(const std::string& layout, const std::string& placement, const std::string& nodes = "2") {
  std::string t = replace_once(kTemplate, "@ENCODER_LAYOUT@", layout);
  t = replace_once(t, "@PLACEMENT@", placement);
  return replace_once(t, "@NODES@", nodes);
}

// HETEROGENEOUS, encoder colocated on the LLM's 16 ranks (TP1 × DP16).
const std::string kColocated = make("    layout { tp: 1 cp: 1 pp: 1 dp: 16 first_rank: 0 }", "HETEROGENEOUS");
// HETEROGENEOUS, encoder on an 8-GPU island after the LLM (ranks 16–23).
const std::string kIsland = make("    layout { tp: 1 cp: 1 pp: 1 dp: 8 first_rank: 16 }", "HETEROGENEOUS", "3");
// OPTIMUS with a fixed colocated encoder plan, and with none (planned).
const std::string kOptimus = make("    layout { tp: 1 cp: 1 pp: 1 dp: 16 first_rank: 0 }", "OPTIMUS");
const std::string kOptimusPlanned = make("", "OPTIMUS");
const std::string kMegatron = make("", "MEGATRON_BASELINE");
const std::string kBalanced = make("", "MEGATRON_BALANCED");
const std::string kLayerSplit = make("", "MEGATRON_LAYER_SPLIT");
// MEGATRON_ENCODER_PP: the encoder on dp 4 × tp 2 ranks of its own after the
// LLM's 16 (3 nodes).
const std::string kEncoderPp = make("    layout { tp: 2 cp: 1 pp: 1 dp: 4 first_rank: 16 }", "MEGATRON_ENCODER_PP", "3");

// The LLM-world rule of validate_consistency ("tp×cp×pp×dp = N but the
// cluster has M GPUs") does not know encoder islands yet; until it subtracts
// encoder_island_gpus(), a valid island scenario stops there.
bool blocked_by_llm_world_rule(const Error& e) {
  return e.where().field == "parallel.dp" && e.problem().find("but the cluster has") != std::string::npos;
}

Scenario parse(const std::string& text) { return parse_scenario(text, Format::kText, "mllm.pbtxt").spec; }

TEST(MultimodalValid, EveryPlacementLoads) {
  for (const auto* text : {&kColocated, &kOptimus, &kOptimusPlanned, &kMegatron, &kBalanced, &kLayerSplit, &kEncoderPp}) {
    EXPECT_NO_THROW(parse(*text)) << *text;
  }
  // The data mix as a share: 0.125 × 2048 × 4 / 256 = 4 images.
  EXPECT_NO_THROW(parse(replace_once(kColocated, "images_per_sample: 2", "vision_token_share: 0.125")));
  // A colocated encoder with TP, SP and fan-in (encoder dp 2 < LLM dp 4).
  EXPECT_NO_THROW(parse(replace_once(kColocated, "layout { tp: 1 cp: 1 pp: 1 dp: 16 first_rank: 0 }",
                                     "layout { tp: 8 cp: 1 pp: 1 dp: 2 first_rank: 0 sequence_parallel: true }")));
  // A colocated encoder with its own pipeline (GPipe phases on the LLM's GPUs).
  EXPECT_NO_THROW(parse(replace_once(kColocated, "layout { tp: 1 cp: 1 pp: 1 dp: 16 first_rank: 0 }",
                                     "layout { tp: 1 cp: 1 pp: 2 dp: 8 first_rank: 0 }")));
  // Optimus with encoder pp dividing the LLM's (2) and tp dividing its tp.
  EXPECT_NO_THROW(parse(replace_once(kOptimus, "layout { tp: 1 cp: 1 pp: 1 dp: 16 first_rank: 0 }",
                                     "layout { tp: 2 cp: 1 pp: 2 dp: 4 first_rank: 0 }")));
}

TEST(MultimodalValid, EncoderIslandPassesTheMultimodalRules) {
  try {
    parse(kIsland);
  } catch (const Error& e) {
    if (blocked_by_llm_world_rule(e)) GTEST_SKIP() << "validate_consistency does not know islands yet: " << e.what();
    FAIL() << e.what();
  }
}

// The encoder pipeline's ranks come on top of the LLM's (defaults: the
// LLM's tp, pp 1); a layout keeps the LLM's dp.
TEST(MultimodalValid, EncoderPipelineRanksAndDp) {
  EXPECT_NO_THROW(parse(make("", "MEGATRON_ENCODER_PP", "3")));
  try {
    parse(make("", "MEGATRON_ENCODER_PP", "2"));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.where().field, "parallel.dp");
    EXPECT_NE(e.problem().find("8 more are the encoder island"), std::string::npos) << e.what();
  }
  try {
    parse(replace_once(kEncoderPp, "dp: 4 first_rank: 16", "dp: 8 first_rank: 16"));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.where().field, "model.encoders[0].layout.dp") << e.what();
  }
}

TEST(MultimodalValid, LlmOnlyScenariosNeedNoPlacement) {
  EXPECT_NO_THROW(load_scenario(testing::source_path("scenarios/llm/gpt-1.3b-8gpu.pbtxt")));
}

struct Case {
  std::string name;
  const std::string* base;
  std::string from;
  std::string to;
  std::string field;
  std::string message;  // substring of Error::problem()
  std::string located;  // text whose line the error must point at ("" = `to`)
  std::string fix;      // substring of Error::fix() ("" = only non-empty)

  Case(std::string n, const std::string* b, std::string f, std::string t, std::string fld, std::string msg,
       std::string loc = {}, std::string fx = {})
      : name(std::move(n)), base(b), from(std::move(f)), to(std::move(t)), field(std::move(fld)),
        message(std::move(msg)), located(std::move(loc)), fix(std::move(fx)) {}
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class MultimodalRule : public ::testing::TestWithParam<Case> {};

TEST_P(MultimodalRule, ReportsFieldMessageAndLine) {
  const Case& c = GetParam();
  const std::string text = replace_once(*c.base, c.from, c.to);
  const Error e = error_of(text, Format::kText, "mllm.pbtxt");
  EXPECT_THAT(e.problem(), HasSubstr(c.message)) << e.what();
  EXPECT_EQ(e.where().field, c.field) << e.what();
  EXPECT_EQ(e.where().file, "mllm.pbtxt");
  EXPECT_EQ(e.where().line, line_of(text, c.located.empty() ? c.to : c.located)) << e.what();
  EXPECT_FALSE(e.fix().empty()) << e.what();
  if (!c.fix.empty()) {
    EXPECT_THAT(e.fix(), HasSubstr(c.fix)) << e.what();
  }
}

const std::string kEnc = "model.encoders[0]";
const std::string kT = "model.encoders[0].transformer.";
const std::string kL = "model.encoders[0].layout.";
const std::string kColLayout = "layout { tp: 1 cp: 1 pp: 1 dp: 16 first_rank: 0 }";
const std::string kIslandLayout = "layout { tp: 1 cp: 1 pp: 1 dp: 8 first_rank: 16 }";

const Case kCases[] = {
    // ---- encoder transformer
    {"enc_layers", &kColocated, "num_layers: 24\n      hidden_size: 1024", "num_layers: 0\n      hidden_size: 1024",
     kT + "num_layers", "must be a positive integer, got 0", "num_layers: 0"},
    {"enc_hidden", &kColocated, "hidden_size: 1024", "hidden_size: 0", kT + "hidden_size",
     "must be a positive integer, got 0"},
    {"enc_heads", &kColocated, "num_attention_heads: 16\n      ffn", "num_attention_heads: -4\n      ffn",
     kT + "num_attention_heads", "must be a positive integer, got -4", "num_attention_heads: -4"},
    {"enc_ffn", &kColocated, "ffn_hidden_size: 4096", "ffn_hidden_size: 0", kT + "ffn_hidden_size",
     "must be a positive integer, got 0"},
    {"enc_tokens_per_image", &kColocated, "seq_length: 256", "seq_length: 0", kT + "seq_length",
     "must be a positive integer, got 0", "", "tokens per image"},
    {"enc_heads_divide_hidden", &kColocated, "num_attention_heads: 16\n      ffn",
     "num_attention_heads: 24\n      ffn", kT + "num_attention_heads",
     "num_attention_heads 24 must divide hidden_size 1024", "num_attention_heads: 24"},
    {"enc_kv_divide_heads", &kColocated, "ffn_hidden_size: 4096", "ffn_hidden_size: 4096\n      num_kv_heads: 6",
     kT + "num_kv_heads", "num_kv_heads 6 must divide num_attention_heads 16", "num_kv_heads: 6"},
    {"enc_bidirectional", &kColocated, "bidirectional_attention: true", "bidirectional_attention: false",
     kT + "bidirectional_attention", "encoders attend bidirectionally, but encoder 0 (vit-a)", "",
     "set bidirectional_attention: true"},
    {"enc_bidirectional_unset", &kColocated, "      bidirectional_attention: true\n", "", kT + "bidirectional_attention",
     "encoders attend bidirectionally", "transformer {"},
    {"enc_dropout", &kColocated, "ffn_hidden_size: 4096", "ffn_hidden_size: 4096\n      hidden_dropout: 1.0",
     kT + "hidden_dropout", "hidden_dropout must be a probability in [0, 1), got 1", "hidden_dropout: 1.0"},

    // ---- data mix and projector
    {"mix_both", &kColocated, "images_per_sample: 2", "images_per_sample: 2\n    vision_token_share: 0.5",
     kEnc + ".vision_token_share", "both images_per_sample (2) and vision_token_share (0.5) are set",
     "vision_token_share: 0.5"},
    {"mix_neither", &kColocated, "    images_per_sample: 2\n", "", kEnc,
     "encoder 0 (vit-a) sets neither images_per_sample nor vision_token_share", "encoders {"},
    {"mix_negative_images", &kColocated, "images_per_sample: 2", "images_per_sample: -1",
     kEnc + ".images_per_sample", "must be ≥ 1 (or unset to use vision_token_share), got -1"},
    {"mix_share_range", &kColocated, "images_per_sample: 2", "vision_token_share: 1.5", kEnc + ".vision_token_share",
     "must be in (0, 1]"},
    // 0.3 × 2048 × 4 / 256 = 9.6; whole counts at 9/32 and 10/32.
    {"mix_share_not_whole", &kColocated, "images_per_sample: 2", "vision_token_share: 0.3",
     kEnc + ".vision_token_share",
     "0.3 × 2048 (llm seq_length) × 4 (token_merge) / 256 (tokens per image) = 9.6 images per sample", "",
     "0.28125 (9 images) or 0.3125 (10 images)"},
    {"mix_share_below_one_image", &kColocated, "images_per_sample: 2", "vision_token_share: 0.01",
     kEnc + ".vision_token_share", "= 0.32 images per sample, not a whole number ≥ 1", "", "0.03125 (1 image)"},
    {"merge_divides_tokens", &kColocated, "token_merge: 4", "token_merge: 3", kEnc + ".projector.token_merge",
     "token_merge 3 must divide the 256 tokens per image"},
    {"merge_negative", &kColocated, "token_merge: 4", "token_merge: -2", kEnc + ".projector.token_merge",
     "token_merge must be between 1 and the tokens per image (256), got -2"},
    {"projector_layers", &kColocated, "num_layers: 2 }", "num_layers: 3 }", kEnc + ".projector.num_layers",
     "the projector has 1 or 2 linear layers, got 3"},
    // 40 images × 256 / 4 = 2560 positions > 2048.
    {"vision_tokens_fit", &kColocated, "images_per_sample: 2", "images_per_sample: 40", kEnc + ".images_per_sample",
     "the encoders fill 2560 LLM positions per sample (encoder 0 (vit-a): 2560) but model.llm.seq_length is 2048"},

    // ---- placement
    {"placement_required", &kColocated, "  kind: HETEROGENEOUS\n", "", "placement.kind",
     "placement.kind is required for a multimodal model: MEGATRON_BASELINE, MEGATRON_BALANCED, OPTIMUS, "
     "HETEROGENEOUS",
     "placement {"},
    {"balanced_stages_negative", &kBalanced, "kind: MEGATRON_BALANCED", "kind: MEGATRON_BALANCED\n  "
     "balanced_virtual_stages: -1", "placement.balanced_virtual_stages", "must be ≥ 0", "balanced_virtual_stages: -1"},
    {"host_link_negative", &kColocated, "kind: HETEROGENEOUS",
     "kind: HETEROGENEOUS\n  heterogeneous { host_link_gb_per_s: -64 }", "placement.heterogeneous.host_link_gb_per_s",
     "must be ≥ 0, got -64", "heterogeneous {"},

    // ---- encoder layout fields
    {"layout_tp_unset", &kColocated, kColLayout, "layout { tp: 0 cp: 1 pp: 1 dp: 16 first_rank: 0 }", kL + "tp",
     "tp must be set"},
    {"layout_dp_missing", &kColocated, kColLayout, "layout { tp: 1 cp: 1 pp: 1 first_rank: 0 }", kL + "dp",
     "dp must be set"},
    {"layout_pp_negative", &kColocated, kColLayout, "layout { tp: 1 cp: 1 pp: -1 dp: 16 first_rank: 0 }", kL + "pp",
     "must be a positive integer, got -1"},
    {"layout_virtual_stages", &kColocated, kColLayout,
     "layout { tp: 1 cp: 1 pp: 1 dp: 16 first_rank: 0 virtual_stages: -2 }", kL + "virtual_stages",
     "must be 0 (one chunk) or a chunk count ≥ 1, got -2"},
    {"layout_first_rank_negative", &kColocated, kColLayout, "layout { tp: 1 cp: 1 pp: 1 dp: 16 first_rank: -8 }",
     kL + "first_rank", "must be a rank ≥ 0, got -8"},
    {"layout_rank_order", &kColocated, kColLayout,
     "layout { tp: 1 cp: 1 pp: 1 dp: 16 first_rank: 0 rank_order: \"tp-dp\" }", kL + "rank_order",
     "\"tp-dp\" must name each of tp, cp, dp and pp once"},
    {"layout_tp_divides_heads", &kColocated, kColLayout, "layout { tp: 3 cp: 1 pp: 1 dp: 16 first_rank: 0 }",
     kL + "tp", "tp=3 (encoder layout) must divide encoder 0 (vit-a)'s attention heads (16)"},
    {"layout_cp_divides_tokens", &kColocated, kColLayout, "layout { tp: 1 cp: 3 pp: 1 dp: 16 first_rank: 0 }",
     kL + "cp", "cp=3 (encoder layout) must divide the 256 tokens per image"},
    {"layout_sp_needs_tp", &kColocated, kColLayout,
     "layout { tp: 1 cp: 1 pp: 1 dp: 16 first_rank: 0 sequence_parallel: true }", kL + "sequence_parallel",
     "sequence_parallel needs tp > 1"},
    {"layout_layers_cover_stages", &kIsland, kIslandLayout, "layout { tp: 1 cp: 1 pp: 32 dp: 8 first_rank: 16 }",
     kL + "pp", "encoder 0 (vit-a) has 24 layers, fewer than its 32 pipeline stages"},

    // ---- HETEROGENEOUS rank sets and batch shards
    {"hetero_needs_layout", &kColocated, "    " + kColLayout + "\n", "", kEnc,
     "HETEROGENEOUS gives every module a layout of its own, but encoder 0 (vit-a) has none", "encoders {"},
    {"hetero_partial_overlap_subset", &kColocated, kColLayout, "layout { tp: 1 cp: 1 pp: 1 dp: 8 first_rank: 0 }",
     kL + "dp", "encoder 0 (vit-a)'s ranks [0, 8) partially overlap the LLM's ranks [0, 16)"},
    {"hetero_partial_overlap_straddle", &kIsland, kIslandLayout, "layout { tp: 1 cp: 1 pp: 1 dp: 8 first_rank: 8 }",
     kL + "first_rank", "ranks [8, 16) partially overlap the LLM's ranks [0, 16)"},
    {"hetero_fits_cluster", &kIsland, kIslandLayout, "layout { tp: 1 cp: 1 pp: 1 dp: 16 first_rank: 16 }", kL + "dp",
     "encoder 0 (vit-a)'s ranks [16, 32) (first_rank + tp·cp·pp·dp) do not fit the cluster's 24 GPUs"},
    {"hetero_island_gap", &kIsland, kIslandLayout, "layout { tp: 1 cp: 1 pp: 1 dp: 4 first_rank: 20 }",
     kL + "first_rank", "ranks [16, 20) between the LLM's [0, 16) and the island [20, 24) are used by no module", "",
     "set first_rank: 16"},
    {"hetero_island_tail", &kIsland, kIslandLayout, "layout { tp: 1 cp: 1 pp: 1 dp: 4 first_rank: 16 }", kL + "dp",
     "ranks [20, 24) of the cluster's 24 GPUs are used by no module"},
    {"hetero_offload_needs_colocation", &kIsland, "kind: HETEROGENEOUS",
     "kind: HETEROGENEOUS\n  heterogeneous { offload_encoder: true }", "placement.heterogeneous.offload_encoder",
     "the encoders here sit on an island of their own", "offload_encoder: true"},
    {"hetero_dp_divides", &kIsland, kIslandLayout, "layout { tp: 1 cp: 1 pp: 1 dp: 3 first_rank: 16 }", kL + "dp",
     "encoder dp=3 and LLM dp=4: one must divide the other"},
    {"hetero_batch_over_encoder_dp", &kColocated, "global_batch: 32", "global_batch: 24", kL + "dp",
     "global_batch 24 does not split evenly over encoder dp=16", kColLayout},

    // ---- OPTIMUS
    {"optimus_llm_cp", &kOptimus, "  cp: 1\n  pp: 2\n  dp: 4", "  cp: 2\n  pp: 2\n  dp: 2", "parallel.cp",
     "OPTIMUS plans the encoder over (DP, PP, TP)", "  cp: 2"},
    {"optimus_encoder_cp", &kOptimus, kColLayout, "layout { tp: 1 cp: 2 pp: 1 dp: 8 first_rank: 0 }", kL + "cp",
     "Optimus encoder plans have no context parallelism; encoder cp is 2"},
    {"optimus_tp_divides", &kOptimus, kColLayout, "layout { tp: 4 cp: 1 pp: 1 dp: 4 first_rank: 0 }", kL + "tp",
     "encoder tp=4 must divide llm tp=2 for Optimus colocation"},
    // pp 3 is checked against the encoder's 24 layers first (fine), then the LLM's pp.
    {"optimus_pp_divides", &kOptimus, kColLayout, "layout { tp: 1 cp: 1 pp: 3 dp: 5 first_rank: 0 }", kL + "pp",
     "encoder pp=3 must divide llm pp=2 for Optimus colocation"},
    {"optimus_world", &kOptimus, kColLayout, "layout { tp: 1 cp: 1 pp: 1 dp: 8 first_rank: 0 }", kL + "dp",
     "encoder ranks [0, 8) must be the LLM's ranks [0, 16) for Optimus colocation", "", "dp: 16"},
    {"optimus_first_rank", &kOptimus, kColLayout, "layout { tp: 1 cp: 1 pp: 1 dp: 16 first_rank: 4 }",
     kL + "first_rank", "encoder ranks [4, 20) must be the LLM's ranks [0, 16)"},

    // ---- MEGATRON baselines
    {"megatron_no_layout", &kMegatron, "projector { token_merge: 4 num_layers: 2 }",
     "projector { token_merge: 4 num_layers: 2 }\n    layout { tp: 1 cp: 1 pp: 1 dp: 16 }", kEnc + ".layout",
     "MEGATRON_BASELINE runs every encoder in the LLM's layout", "layout {"},
    {"megatron_tp_divides_encoder_ffn", &kMegatron, "ffn_hidden_size: 4096", "ffn_hidden_size: 4095", "parallel.tp",
     "tp=2 (the LLM's, which MEGATRON_BASELINE gives the encoders) must divide encoder 0 (vit-a)'s ffn_hidden_size "
     "(4095)",
     "  tp: 2"},
    // 24 + 24 layers over pp 2 × 100 chunks.
    {"balanced_chain_layers", &kBalanced, "kind: MEGATRON_BALANCED",
     "kind: MEGATRON_BALANCED\n  balanced_virtual_stages: 100", "placement.balanced_virtual_stages",
     "the encoder + LLM chain has 48 layers, fewer than pp × virtual stages = 2 × 100", "balanced_virtual_stages: 100"},
};

INSTANTIATE_TEST_SUITE_P(All, MultimodalRule, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return info.param.name; });

// A second encoder block (a ViT-B-class branch) inserted after the first.
std::string with_second_encoder(const std::string& base, const std::string& second_layout,
                                const std::string& images = "1") {
  return replace_once(base, "  }\n}\ncluster", R"(  }
  encoders {
    transformer {
      name: "vit-b"
      num_layers: 12
      hidden_size: 768
      num_attention_heads: 12
      ffn_hidden_size: 3072
      seq_length: 196
      bidirectional_attention: true
    }
    images_per_sample: )" + images + R"(
)" + second_layout + R"(
  }
}
cluster)");
}

TEST(MultimodalMultiBranch, VisionTokensOfAllEncodersMustFitTheSequence) {
  // 128 + 1 × 196 fits; 128 + 10 × 196 = 2088 does not, and the second
  // encoder's data mix is where the sum goes over.
  const std::string fits = with_second_encoder(kMegatron, "");
  EXPECT_NO_THROW(parse(fits));
  const std::string text = with_second_encoder(kMegatron, "", "10");
  const Error e = error_of(text, Format::kText, "mllm.pbtxt");
  EXPECT_EQ(e.where().field, "model.encoders[1].images_per_sample");
  EXPECT_THAT(e.problem(), HasSubstr("the encoders fill 2088 LLM positions per sample (encoder 0 (vit-a): 128, "
                                     "encoder 1 (vit-b): 1960)"));
  EXPECT_EQ(e.where().line, line_of(text, "images_per_sample: 10"));
}

TEST(MultimodalMultiBranch, HeterogeneousColocatedEncodersMayDiffer) {
  EXPECT_NO_THROW(parse(with_second_encoder(kColocated, "    layout { tp: 4 cp: 1 pp: 1 dp: 4 first_rank: 0 }")));
}

TEST(MultimodalMultiBranch, ColocatedAndIslandDoNotMix) {
  const std::string text = with_second_encoder(kIsland, "    layout { tp: 2 cp: 1 pp: 1 dp: 8 first_rank: 0 }");
  const Error e = error_of(text, Format::kText, "mllm.pbtxt");
  EXPECT_EQ(e.where().field, "model.encoders[1].layout");
  EXPECT_THAT(e.problem(), HasSubstr("encoder 1 (vit-b) is colocated with the LLM but encoder 0 (vit-a) sits on an "
                                     "island: encoders are either all colocated with the LLM or all share one island "
                                     "layout"));
  EXPECT_EQ(e.where().line, line_of(text, "layout { tp: 2 cp: 1 pp: 1 dp: 8 first_rank: 0 }"));
}

TEST(MultimodalMultiBranch, IslandEncodersShareOneLayout) {
  const std::string text = with_second_encoder(kIsland, "    layout { tp: 2 cp: 1 pp: 1 dp: 4 first_rank: 16 }");
  const Error e = error_of(text, Format::kText, "mllm.pbtxt");
  EXPECT_EQ(e.where().field, "model.encoders[1].layout");
  EXPECT_THAT(e.problem(), HasSubstr("encoder 1 (vit-b)'s island layout differs from encoder 0 (vit-a)'s"));
  // The same island layout is fine.
  try {
    parse(with_second_encoder(kIsland, "    " + kIslandLayout));
  } catch (const Error& other) {
    EXPECT_TRUE(blocked_by_llm_world_rule(other)) << other.what();
  }
}

TEST(MultimodalMultiBranch, OptimusBranchesShareOnePlan) {
  const std::string differ = with_second_encoder(kOptimus, "    layout { tp: 2 cp: 1 pp: 1 dp: 8 first_rank: 0 }");
  Error e = error_of(differ, Format::kText, "mllm.pbtxt");
  EXPECT_EQ(e.where().field, "model.encoders[1].layout");
  EXPECT_THAT(e.problem(), HasSubstr("Optimus schedules multi-branch encoders as one: they share one (DP, PP, TP) "
                                     "plan, but encoder 1 (vit-b)'s layout differs from encoder 0's"));
  const std::string missing = with_second_encoder(kOptimus, "");
  e = error_of(missing, Format::kText, "mllm.pbtxt");
  EXPECT_EQ(e.where().field, "model.encoders[1]");
  EXPECT_THAT(e.problem(), HasSubstr("encoder 1 (vit-b) has no layout"));
  EXPECT_NO_THROW(parse(with_second_encoder(kOptimus, "    " + kColLayout)));
}

TEST(MultimodalPlacement, KindWithoutEncodersIsAnError) {
  const std::string text = read_source("scenarios/llm/gpt-1.3b-8gpu.pbtxt") + "\nplacement { kind: OPTIMUS }\n";
  const Error e = error_of(text, Format::kText, "llm.pbtxt");
  EXPECT_EQ(e.where().field, "placement.kind");
  EXPECT_THAT(e.problem(), HasSubstr("placement.kind is OPTIMUS but the model has no encoders"));
  EXPECT_EQ(e.where().line, line_of(text, "placement { kind: OPTIMUS }"));
}

TEST(MultimodalPlacement, JsonPathsAreTheSame) {
  // The JSON reader records repeated fields with the same "[i]" paths.
  const std::string json = R"({
  "model": {
    "llm": {"numLayers": 24, "hiddenSize": 2048, "numAttentionHeads": 16, "numKvHeads": 16,
            "ffnHiddenSize": 8192, "activation": "GELU", "norm": "LAYERNORM", "vocabSize": 51200,
            "seqLength": 2048, "positionEmbedding": "POSITION_ROTARY"},
    "encoders": [{
      "transformer": {"numLayers": 24, "hiddenSize": 1024, "numAttentionHeads": 16, "ffnHiddenSize": 4096,
                      "seqLength": 256,
                      "bidirectionalAttention": false},
      "imagesPerSample": 2
    }]
  },
  "cluster": {"preset": "h100-sxm", "numNodes": 2},
  "parallel": {"tp": 2, "cp": 1, "pp": 2, "dp": 4, "virtualStages": 1},
  "schedule": {"kind": "ONE_F_ONE_B"},
  "training": {"globalBatch": 32, "microBatch": 1, "precision": "BF16"},
  "placement": {"kind": "MEGATRON_BASELINE"}
})";
  const Error e = error_of(json, Format::kJson, "mllm.json");
  EXPECT_EQ(e.where().field, "model.encoders[0].transformer.bidirectional_attention");
  EXPECT_EQ(e.where().line, line_of(json, "\"bidirectionalAttention\": false"));
}

}  // namespace
}  // namespace lacuna::scenario
