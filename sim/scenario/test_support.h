// Helpers for the scenario tests: shipped files as text, edits, line lookup.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "sim/scenario/scenario.h"

namespace lacuna::scenario::testing {

inline std::string source_path(const std::string& rel) { return std::string(LACUNA_SOURCE_DIR) + "/" + rel; }

inline std::string read_source(const std::string& rel) {
  std::ifstream in(source_path(rel), std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// `text` with the one occurrence of `from` replaced by `to` (fails the test if
// `from` is absent or ambiguous).
inline std::string replace_once(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << "missing: " << from;
  if (at == std::string::npos) return text;
  EXPECT_EQ(text.find(from, at + 1), std::string::npos) << "ambiguous: " << from;
  return text.replace(at, from.size(), to);
}

// 1-based line of the first occurrence of `needle`.
inline int line_of(const std::string& text, const std::string& needle) {
  const auto at = text.find(needle);
  EXPECT_NE(at, std::string::npos) << "missing: " << needle;
  if (at == std::string::npos) return -1;
  int line = 1;
  for (size_t i = 0; i < at; ++i) line += text[i] == '\n';
  return line;
}

// The Error parse_scenario throws for `text`; fails the test when none is thrown.
inline Error error_of(const std::string& text, Format format, const std::string& name = "test.pbtxt") {
  try {
    parse_scenario(text, format, name);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error for:\n" << text;
  return Error("no error");
}

}  // namespace lacuna::scenario::testing
