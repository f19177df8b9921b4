// End-to-end: `lacuna import hf|megatron` writes a scenario `lacuna check`
// accepts, atomically, through a symlink without replacing it; unknown
// architectures and flags are named; `check` lists the defaults it filled and
// every error of a file at once (docs/import.md, docs/scenario.md#defaults).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/cli_test_util.h"

namespace lacuna::testing {
namespace {

TEST(ImportE2E, HfWritesAScenarioThatChecksAndSimulates) {
  TempDir dir("import-hf");
  const std::string out = dir / "mixtral.pbtxt";
  const auto r = run_lacuna("import hf " + source_path("tests/data/hf/mixtral-8x7b.json") +
                            " --num-nodes 2 --tp 2 --pp 2 --ep 4 --expert-tp 1 --sequence-parallel -o " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string text = read_file(out);
  EXPECT_NE(text.find("num_experts: 8  # mixtral-8x7b.json: num_local_experts"), std::string::npos) << text;
  const auto check = run_lacuna("check " + out);
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_NE(check.output.find(": ok"), std::string::npos);
}

TEST(ImportE2E, OutputThroughASymlinkKeepsTheLink) {
  TempDir dir("import-link");
  const std::string target = dir / "real.pbtxt";
  { std::ofstream(target) << "old"; }
  std::filesystem::create_symlink(target, dir / "link.pbtxt");
  const auto r = run_lacuna("import hf " + source_path("tests/data/hf/llama-3-8b.json") + " -o " + (dir / "link.pbtxt"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::filesystem::is_symlink(dir / "link.pbtxt"));
  EXPECT_NE(read_file(target).find("num_layers: 32"), std::string::npos);
}

TEST(ImportE2E, UnknownArchitectureIsExitTwoNamingTheFields) {
  const auto r = run_lacuna("import hf " + source_path("tests/data/hf/unknown-gpt-neox.json"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("unknown architecture \"GPTNeoXForCausalLM\""), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("could not map: rotary_emb_base, rotary_pct, use_parallel_residual"), std::string::npos);
}

TEST(ImportE2E, MegatronFromAScriptWithAnUnknownFlag) {
  TempDir dir("import-meg");
  const std::string script = dir / "run.sh";
  {
    std::ofstream s(script);
    s << read_file(source_path("tests/data/megatron/gpt3-175b-3072.sh")) << " \\\n    --shiny-new-flag 3\n";
  }
  const auto r = run_lacuna("import megatron --from " + script + " -o " + (dir / "gpt3.pbtxt"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("warning: flags not mapped: --shiny-new-flag"), std::string::npos) << r.output;
  EXPECT_NE(read_file(dir / "gpt3.pbtxt").find("--shiny-new-flag"), std::string::npos);
  EXPECT_EQ(run_lacuna("check " + (dir / "gpt3.pbtxt")).exit_code, 0);
  // The flags on the command line itself (after --), the GPU count from WORLD_SIZE.
  const auto inline_args = run_command("WORLD_SIZE=16 " + std::string(LACUNA_BINARY) +
                                       " import megatron -- --num-layers 4 --hidden-size 512 --num-attention-heads 8"
                                       " --seq-length 256 --vocab-size 1000 --tensor-model-parallel-size 2 --bf16 2>&1");
  ASSERT_EQ(inline_args.exit_code, 0) << inline_args.output;
  EXPECT_NE(inline_args.output.find("num_nodes: 2  # WORLD_SIZE=16 / 8 GPUs per node"), std::string::npos)
      << inline_args.output;
  EXPECT_NE(inline_args.output.find("dp: 8"), std::string::npos);
}

TEST(ImportE2E, CheckListsDefaultsAndEveryError) {
  TempDir dir("check");
  std::string text = read_file(source_path("scenarios/llm/gpt-1.3b-8gpu.pbtxt"));
  const auto drop = [&](const std::string& s) {
    const auto at = text.find(s);
    ASSERT_NE(at, std::string::npos) << s;
    text.erase(at, s.size());
  };
  drop("  cp: 1\n");
  drop("  dp: 2\n");
  { std::ofstream(dir / "d.pbtxt") << text; }
  const auto ok = run_lacuna("check " + (dir / "d.pbtxt"));
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("#   parallel.cp = 1  (not set: no context parallelism)"), std::string::npos) << ok.output;
  EXPECT_NE(ok.output.find("#   parallel.dp = 2"), std::string::npos) << ok.output;

  const auto replace = [&](const std::string& from, const std::string& to) {
    const auto at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
  };
  text = read_file(source_path("scenarios/llm/gpt-1.3b-8gpu.pbtxt"));
  replace("num_layers: 24", "num_layers: -1");
  replace("micro_batch: 2", "micro_batch: 0");
  replace("preset: \"h100-sxm\"", "preset: \"h100-sxm\"\n  gpus_per_node: 0");
  { std::ofstream(dir / "bad.pbtxt") << text; }
  const auto bad = run_lacuna("check " + (dir / "bad.pbtxt"));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("3 problems:"), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("1. "), std::string::npos);
  EXPECT_NE(bad.output.find("model.llm.num_layers"), std::string::npos);
  EXPECT_NE(bad.output.find("cluster.gpus_per_node"), std::string::npos);
  EXPECT_NE(bad.output.find("training.micro_batch"), std::string::npos);
}

}  // namespace
}  // namespace lacuna::testing
