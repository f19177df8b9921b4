// Issue 39's families of hostile inputs to the commands added after the first
// bad-input campaign (docs/reliability.md#hostile-inputs): each case failed
// on the binary before the fix, by damaging a file, hanging, answering
// wrongly with exit 0, or dying with an internal error. Each now exits 2 with
// one "lacuna: error:" line naming the option, file or field, and leaves
// every input as it was. FIFOs live in temporary directories, never /dev.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "tests/cli_test_util.h"

namespace lacuna::testing {
namespace {

namespace fs = std::filesystem;

const std::string kCpuScenario = "scenarios/cpu/tiny-mllm-cpu-2rank.pbtxt";
const std::string kSmallLlm = "scenarios/llm/gpt-1.3b-8gpu.pbtxt";

std::string copy_in(const TempDir& dir, const std::string& rel, const std::string& name) {
  fs::copy_file(source_path(rel), dir / name);
  return dir / name;
}

void expect_user_error(const CommandResult& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("lacuna: error: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(needle), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
}

// ------------------------------------------------------------ data damage

TEST(HostileInputsE2E, CalibrateRefusesToWriteItsInputScenarioBeforeMeasuring) {
  TempDir dir("hostile-calibrate");
  const std::string scenario = copy_in(dir, kCpuScenario, "s.pbtxt");
  const std::string before = read_file(scenario);
  expect_user_error(run_lacuna("calibrate --cpu --scenario " + scenario + " -o " + scenario),
                    "is the same file as the input");
  EXPECT_EQ(read_file(scenario), before);
  // A directory is refused before the minute of measuring, not after.
  const auto r = run_lacuna("calibrate --cpu --scenario " + scenario + " -o " + dir.path().string());
  expect_user_error(r, "is a directory");
  EXPECT_EQ(r.output.find("points measured"), std::string::npos) << r.output;
}

TEST(HostileInputsE2E, ImportRefusesToWriteItsEncoderConfigOrAReadOnlyFile) {
  TempDir dir("hostile-import");
  const std::string llm = source_path("tests/data/hf/llama-3-8b.json");
  const std::string enc = copy_in(dir, "tests/data/hf/siglip-so400m-patch14-384.json", "enc.json");
  const std::string before = read_file(enc);
  expect_user_error(run_lacuna("import hf " + llm + " --encoder " + enc + " -o " + enc), "(--encoder)");
  fs::create_symlink(enc, dir / "link.pbtxt");
  expect_user_error(run_lacuna("import hf " + llm + " --encoder " + enc + " -o " + (dir / "link.pbtxt")),
                    "(--encoder)");
  EXPECT_EQ(read_file(enc), before);
  // A file made read-only is not replaced (rename would, whatever its mode).
  { std::ofstream(dir / "ro.pbtxt") << "keep"; }
  fs::permissions(dir / "ro.pbtxt", fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  expect_user_error(run_lacuna("import hf " + llm + " -o " + (dir / "ro.pbtxt")), "read-only");
  expect_user_error(run_lacuna("simulate " + source_path(kSmallLlm) + " --fold --no-trace --no-svg --json " +
                               (dir / "ro.pbtxt")),
                    "read-only");
  EXPECT_EQ(read_file(dir / "ro.pbtxt"), "keep");
}

TEST(HostileInputsE2E, SearchJournalsThatAreNotRegularFilesAreRefused) {
  TempDir dir("hostile-journal");
  const std::string scenario = copy_in(dir, kSmallLlm, "s.pbtxt");
  const std::string before = read_file(scenario);
  const std::string args = "search " + scenario + " --simulate 3 --csv " + (dir / "out.csv") + " --svg " +
                           (dir / "out.svg");
  // A link to the scenario is an output that is an input; a link to any
  // other file is still never written through.
  fs::create_symlink(scenario, dir / "out.csv.journal");
  expect_user_error(run_lacuna(args), "--csv's journal: is the same file as the input");
  expect_user_error(run_lacuna(args + " --resume"), "--csv's journal: is the same file as the input");
  EXPECT_EQ(read_file(scenario), before);
  fs::remove(dir / "out.csv.journal");
  { std::ofstream(dir / "notes.txt") << "keep"; }
  fs::create_symlink(dir / "notes.txt", dir / "out.csv.journal");
  expect_user_error(run_lacuna(args), "symbolic link");
  expect_user_error(run_lacuna(args + " --resume"), "symbolic link");
  EXPECT_EQ(read_file(dir / "notes.txt"), "keep");
  fs::remove(dir / "out.csv.journal");
  ASSERT_EQ(::mkfifo((dir / "out.csv.journal").c_str(), 0600), 0);
  expect_user_error(run_lacuna(args + " --resume"), "a FIFO");  // returns: never opened
  EXPECT_FALSE(fs::exists(dir / "out.csv"));
}

TEST(HostileInputsE2E, SearchSummaryOnlyWritesNothingAndCannotResume) {
  TempDir dir("hostile-summary");
  const std::string scenario = source_path(kSmallLlm);
  const auto r = run_command("cd " + dir.path().string() + " && " + LACUNA_BINARY + " search " + scenario +
                             " --simulate 3 --summary-only 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::is_empty(dir.path())) << "search --summary-only left files in the working directory";
  expect_user_error(run_lacuna("search " + scenario + " --simulate 3 --summary-only --resume"), "--resume");
  expect_user_error(run_lacuna("search " + scenario + " --simulate 100000"), "--simulate");
}

TEST(HostileInputsE2E, SweepNamingOneFileTwiceLeavesItUntouched) {
  TempDir dir("hostile-sweep");
  { std::ofstream(dir / "X") << "keep"; }
  expect_user_error(run_lacuna("sweep " + source_path(kSmallLlm) + " --set training.global_batch=8,16 --csv " +
                               (dir / "X") + " --json " + (dir / "X")),
                    "one would overwrite the other");
  EXPECT_EQ(read_file(dir / "X"), "keep");
  // A finished sweep leaves no journal; --resume needs one to read.
  const auto r = run_lacuna("sweep " + source_path(kSmallLlm) + " --fold --set training.global_batch=8,16 --csv " +
                            (dir / "ok.csv"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(fs::exists(dir / "ok.csv.journal"));
  expect_user_error(run_lacuna("sweep " + source_path(kSmallLlm) + " --fold --set training.global_batch=8,16 --resume"),
                    "--resume");
  fs::create_symlink(dir / "X", dir / "ok.csv.journal");
  expect_user_error(run_lacuna("sweep " + source_path(kSmallLlm) + " --fold --set training.global_batch=8,16 --csv " +
                               (dir / "ok.csv") + " --resume"),
                    "symbolic link");
  EXPECT_EQ(read_file(dir / "X"), "keep");
  // A bad profile names the option it came in by, and the file.
  { std::ofstream(dir / "profile.pbtxt") << "garbage {\n"; }
  expect_user_error(run_lacuna("sweep " + source_path(kSmallLlm) + " --set training.global_batch=8,16 --calibration " +
                               (dir / "profile.pbtxt")),
                    "profile.pbtxt:1:9: --calibration: ");
}

// ------------------------------------------------------------ bounded work

// Every plan or point to run is compiled and its run estimated before the
// first simulation; a batch whose runs in flight would not fit the memory
// limit is refused then, leaving no output and no journal, and an accepted
// one states its estimate (docs/performance.md#batch-estimate).
TEST(HostileInputsE2E, SearchesAndSweepsOverTheMemoryLimitAreRefusedBeforeTheFirstRun) {
  TempDir dir("hostile-bounded");
  const std::string scenario = source_path(kSmallLlm);
  const std::string search = "search " + scenario + " --simulate 3 --csv " + (dir / "s.csv") + " --svg " +
                             (dir / "s.svg");
  const auto refused = run_lacuna(search + " -j 3 --max-host-memory-gb 0.000001");
  expect_user_error(refused, "--max-host-memory-gb: the plans would need about");
  EXPECT_NE(refused.output.find("3 plans in flight at once"), std::string::npos) << refused.output;
  EXPECT_EQ(refused.output.find("plans simulated"), std::string::npos) << refused.output;
  EXPECT_TRUE(fs::is_empty(dir.path())) << "a refused search left files behind";
  const auto ok = run_lacuna(search + " --max-host-memory-gb 0 -j 3");
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("(estimated 3 plans: "), std::string::npos) << ok.output;
  fs::remove(dir / "s.csv");
  fs::remove(dir / "s.svg");

  const std::string sweep = "sweep " + scenario + " --set training.global_batch=8,16 -j 2 --csv " + (dir / "w.csv");
  expect_user_error(run_lacuna(sweep + " --max-memory-gb 0.000001"),
                    "--max-memory-gb: the points would need about");
  EXPECT_TRUE(fs::is_empty(dir.path())) << "a refused sweep left files behind";
  ASSERT_EQ(run_lacuna(sweep + " --max-memory-gb 0").exit_code, 0);
}

// ------------------------------------------------- wrong answers, exit 0

TEST(HostileInputsE2E, ACapacityFactorBelowOneIsRefused) {
  expect_user_error(run_lacuna("simulate " + source_path("scenarios/moe/deepseek-v3-h100-1024.pbtxt") +
                               " --fold --no-trace --no-svg --set model.llm.moe.capacity_factor=1e-300"),
                    "model.llm.moe.capacity_factor");
}

TEST(HostileInputsE2E, ImportArithmeticThatWouldWrapIsRefusedByKey) {
  TempDir dir("hostile-import-math");
  const std::string llava = source_path("tests/data/hf/llava-1.5-7b.json");
  expect_user_error(run_lacuna("import hf " + llava + " --image-size 0"), "--image-size");
  expect_user_error(run_lacuna("import hf " + llava + " --image-size 60129542144"), "beyond a 64-bit count");
  expect_user_error(run_lacuna("import hf " + llava + " --images-per-sample -1"), "--images-per-sample");
  // n_shared_experts × moe_intermediate_size past int64.
  std::string ds = read_file(source_path("tests/data/hf/deepseek-v3.json"));
  const auto set_key = [&](const std::string& key, const std::string& value) {
    const size_t at = ds.find("\"" + key + "\"");
    ASSERT_NE(at, std::string::npos) << key;
    const size_t colon = ds.find(':', at), end = ds.find_first_of(",}", colon);
    ds.replace(colon + 1, end - colon - 1, " " + value);
  };
  set_key("n_shared_experts", "1099511627776");
  set_key("moe_intermediate_size", "1099511627776");
  { std::ofstream(dir / "ds.json") << ds; }
  expect_user_error(run_lacuna("import hf " + (dir / "ds.json")), "n_shared_experts");
}

// ------------------------------------------------------- hangs, crashes

TEST(HostileInputsE2E, DeeplyNestedJsonIsRefusedAtOnce) {
  TempDir dir("hostile-deep");
  const int n = 100000;
  {
    std::ofstream out(dir / "deep.json");
    out << R"({"architectures": ["LlamaForCausalLM"], "x": )" << std::string(n, '[') << std::string(n, ']') << "}";
  }
  expect_user_error(run_lacuna("import hf " + (dir / "deep.json")), "nests deeper than 64 levels");
}

TEST(HostileInputsE2E, TextThatIsNotUtf8AndNamesTooLongForFilesAreRefused) {
  const std::string scenario = source_path(kSmallLlm);
  expect_user_error(run_lacuna("simulate " + scenario + " --fold --no-trace --no-svg --set 'name=\"\\377\\376\"'"),
                    "name: is not valid UTF-8 text");
  expect_user_error(run_lacuna("simulate " + scenario + " --fold --no-trace --no-svg --set 'name=\"" +
                               std::string(40000, 'a') + "\"'"),
                    "a name may have at most 200");
  // The message quotes a long value by its start and size, not whole.
  const auto r = run_lacuna("simulate " + scenario + " --fold --no-trace --no-svg --set name=" + std::string(40000, 'a'));
  expect_user_error(r, "(40005 bytes)");
  EXPECT_LT(r.output.size(), 40000u) << r.output.size();
}

TEST(HostileInputsE2E, OutOfRangeIntegersInMegatronArgumentsAreUserErrors) {
  const std::string base = "import megatron -- --num-layers 8 --hidden-size 512 --num-attention-heads 8 "
                           "--seq-length 1024 --max-position-embeddings 1024 --micro-batch-size 1 "
                           "--global-batch-size 8 --num-experts 8 --vocab-size 32000 --moe-layer-freq ";
  expect_user_error(run_lacuna(base + "'([0]*99999999999999999999999+[1]*3)'"), "--moe-layer-freq");
  expect_user_error(run_lacuna(base + "99999999999999999999999"), "--moe-layer-freq");
}

TEST(HostileInputsE2E, CommandLineRefusalsPrintTheErrorLine) {
  expect_user_error(run_lacuna("simulate"), "INPUT is required");
  expect_user_error(run_lacuna("search " + source_path(kSmallLlm) + " --jobs -1"), "--jobs");
}

}  // namespace
}  // namespace lacuna::testing
