// Property: corrupted scenario files are rejected with lacuna::Error, never a
// crash, a hang or another exception type.
#include <gtest/gtest.h>

#include <random>
#include <regex>

#include "sim/scenario/test_support.h"

namespace lacuna::scenario {
namespace {

using testing::read_source;

struct Input {
  std::string file;
  Format format;
};

const Input kInputs[] = {
    {"scenarios/llm/gpt-1.3b-8gpu.pbtxt", Format::kText},
    {"scenarios/examples/gpt-1.3b-8gpu.json", Format::kJson},
};

// Positions and lengths of the integer values (every one is a count that must
// be positive and bounded in these files).
std::vector<std::pair<size_t, size_t>> integer_values(const std::string& text) {
  std::vector<std::pair<size_t, size_t>> out;
  const std::regex value(R"(:\s*(\d+)\s*[,\n])");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), value); it != std::sregex_iterator(); ++it)
    out.emplace_back(static_cast<size_t>(it->position(1)), static_cast<size_t>(it->length(1)));
  return out;
}

// Runs the parser; returns true if it threw lacuna::Error, false if it
// accepted. Any other exception fails the test.
bool rejected(const std::string& text, Format format) {
  try {
    parse_scenario(text, format, "fuzz");
    return false;
  } catch (const Error&) {
    return true;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "non-lacuna exception: " << e.what() << "\n" << text;
    return true;
  }
}

TEST(Fuzz, BadCountsAreAlwaysRejected) {
  for (const auto& in : kInputs) {
    const std::string base = read_source(in.file);
    const auto values = integer_values(base);
    ASSERT_GE(values.size(), 15u) << in.file;
    for (const auto& [at, len] : values) {
      for (const char* bad : {"0", "-1", "4611686018427387904"}) {
        std::string text = base;
        text.replace(at, len, bad);
        EXPECT_TRUE(rejected(text, in.format)) << in.file << " value at " << at << " = " << bad;
      }
    }
  }
}

TEST(Fuzz, TruncationsAreAlwaysRejected) {
  std::mt19937 rng(1234);
  for (const auto& in : kInputs) {
    const std::string base = read_source(in.file);
    const size_t last_brace = base.rfind('}');
    std::uniform_int_distribution<size_t> cut(0, last_brace);
    for (int i = 0; i < 300; ++i) {
      const size_t n = cut(rng);
      EXPECT_TRUE(rejected(base.substr(0, n), in.format)) << in.file << " cut at " << n;
    }
  }
}

TEST(Fuzz, RandomBytesNeverCrash) {
  std::mt19937 rng(5678);
  int rejected_count = 0;
  int total = 0;
  for (const auto& in : kInputs) {
    const std::string base = read_source(in.file);
    std::uniform_int_distribution<size_t> pos(0, base.size() - 1);
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_int_distribution<int> count(1, 8);
    for (int i = 0; i < 500; ++i) {
      std::string text = base;
      for (int k = count(rng); k > 0; --k) text[pos(rng)] = static_cast<char>(byte(rng));
      rejected_count += rejected(text, in.format);
      ++total;
    }
    // Pure garbage, and garbage that starts like a scenario.
    for (int i = 0; i < 100; ++i) {
      std::string junk(static_cast<size_t>(count(rng) * 16), '\0');
      for (auto& ch : junk) ch = static_cast<char>(byte(rng));
      EXPECT_TRUE(rejected(junk, in.format));
      EXPECT_TRUE(rejected(base.substr(0, base.size() / 2) + junk, in.format));
    }
  }
  // Most corruptions break the syntax or a rule; a few land in comments or
  // strings and are harmless.
  EXPECT_GT(rejected_count, total / 2);
}

}  // namespace
}  // namespace lacuna::scenario
