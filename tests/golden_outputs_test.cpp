// Golden hashes of the shipped scenarios' JSON summaries (docs/performance.md
// #golden-outputs): a speed-up must leave every prediction byte-identical, so
// each shipped scenario that simulates folded in about a second is run and its
// summary hashed against tests/data/golden-summaries.txt. A change that means
// to move a prediction regenerates the file (LACUNA_UPDATE_GOLDEN=1) and says
// so in its commit; one that does not, fails here naming the scenario.
//
// The hash covers the whole JSON (timeline included) except the fields that
// name the build and the input path (and the program digest, which covers the
// path), not the prediction. Release builds
// only: a sanitizer build's different optimisation may round differently.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tests/cli_test_util.h"

namespace lacuna {
namespace {

using testing::read_file;
using testing::run_lacuna;
using testing::source_path;
using testing::TempDir;

// Shipped scenarios whose folded run takes at most about a second on the
// 2-core development machine (Release). `--fold` keeps the set fast; the
// folded and full-rank engines share every hot path the speed work touches,
// and full-rank runs are pinned by tests/simulate_e2e_test.cpp.
const char* const kScenarios[] = {
    "scenarios/cpu/tiny-mllm-cpu-2rank.pbtxt",
    "scenarios/cpu/tiny-mllm-cpu-8rank.pbtxt",
    "scenarios/examples/gpt-1.3b-8gpu.json",
    "scenarios/hardware/h100-node-no-preset.pbtxt",
    "scenarios/llm/gpt-1.3b-8gpu.pbtxt",
    "scenarios/llm/gpt3-175b-3072.pbtxt",
    "scenarios/llm/llama2-70b-1024-zbh1.pbtxt",
    "scenarios/llm/megascale-175b-12288.pbtxt",
    "scenarios/mllm/mimo-1b-14b-72-colocated.pbtxt",
    "scenarios/mllm/mimo-1b-14b-72-homogeneous.pbtxt",
    "scenarios/mllm/mimo-1b-7b-64k-32-colocated.pbtxt",
    "scenarios/mllm/mimo-1b-7b-64k-32-homogeneous.pbtxt",
    "scenarios/mllm/optimus-small-vit3b-gpt11b-8xa100.pbtxt",
    "scenarios/mllm/optimus-weak-a-vit-11b-llama-70b-64.pbtxt",
    "scenarios/mllm/optimus-weak-b-vit-22b-llama-70b-128.pbtxt",
    "scenarios/validation/ptdp-01-1.7b.pbtxt",
    "scenarios/validation/ptdp-02-3.6b.pbtxt",
    "scenarios/validation/ptdp-03-7.5b.pbtxt",
    "scenarios/validation/ptdp-04-18.4b.pbtxt",
    "scenarios/validation/ptdp-05-39.1b.pbtxt",
    "scenarios/validation/ptdp-06-76.1b.pbtxt",
    "scenarios/validation/ptdp-07-145.6b.pbtxt",
    "scenarios/validation/sar-22b-full.pbtxt",
    "scenarios/validation/sar-22b-selective-sp.pbtxt",
    "scenarios/validation/sar-175b-full.pbtxt",
};

const char* const kGoldenFile = "tests/data/golden-summaries.txt";

uint64_t fnv1a64(const std::string& bytes) {
  uint64_t h = 14695981039346656037ull;
  for (const unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// "scenario fnv1a64:<hex>" lines; '#' starts a comment.
std::map<std::string, std::string> read_golden(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string scenario, hash;
    fields >> scenario >> hash;
    out[scenario] = hash;
  }
  return out;
}

std::string summary_hash(const std::string& scenario, const TempDir& dir) {
  const std::string json = dir / "s.json";
  const auto r = run_lacuna("simulate " + source_path(scenario) + " --fold --no-trace --no-svg --json " + json);
  if (r.exit_code != 0) return "exit " + std::to_string(r.exit_code) + ": " + r.output;
  nlohmann::json j = nlohmann::json::parse(read_file(json));
  j.erase("lacuna_version");  // the build
  j.erase("scenario_file");   // the path it was given
  j.erase("program_digest");  // digests the program, which names that path too
  return fmt::format("fnv1a64:{:016x}", fnv1a64(j.dump()));
}

TEST(GoldenOutputs, ShippedScenariosPredictWhatTheyDidBefore) {
#if defined(LACUNA_SANITIZED)
  GTEST_SKIP() << "golden hashes pin the Release build's arithmetic";
#endif
  const std::map<std::string, std::string> golden = read_golden(read_file(source_path(kGoldenFile)));
  const bool update = std::getenv("LACUNA_UPDATE_GOLDEN") != nullptr;
  TempDir dir("golden");
  std::string regenerated =
      "# JSON summary hashes of `lacuna simulate S --fold --no-trace --no-svg --json F`, without\n"
      "# lacuna_version, scenario_file and program_digest (tests/golden_outputs_test.cpp). Regenerate with\n"
      "# LACUNA_UPDATE_GOLDEN=1 build/lacuna_tests --gtest_filter='GoldenOutputs.*' only when a\n"
      "# change means to move a prediction.\n";
  for (const char* scenario : kScenarios) {
    const std::string hash = summary_hash(scenario, dir);
    regenerated += std::string(scenario) + " " + hash + "\n";
    if (update) continue;
    const auto it = golden.find(scenario);
    ASSERT_NE(it, golden.end()) << scenario << " has no golden hash in " << kGoldenFile;
    EXPECT_EQ(hash, it->second) << scenario << ": its JSON summary changed";
  }
  if (update) {
    std::ofstream(source_path(kGoldenFile), std::ios::binary) << regenerated;
    GTEST_SKIP() << "wrote " << kGoldenFile;
  }
  EXPECT_EQ(golden.size(), std::size(kScenarios)) << kGoldenFile << " lists scenarios this test no longer runs";
}

}  // namespace
}  // namespace lacuna
