#include "sim/search/search_journal.h"

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/core/error.h"

namespace lacuna::search {

Simulated parse_record(const std::string& record, const SourceLocation& where) {
  const auto bad = [&](const std::string& what) -> Error {
    return Error(where, "the record " + what, std::string(kJournalInput.fix));
  };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(record);
  } catch (const nlohmann::json::exception& e) {
    throw bad(std::string("is not JSON: ") + e.what());
  }
  if (!j.is_object()) throw bad("is not a JSON object");
  Simulated s;
  if (j.contains("problem")) {
    if (j.size() != 1 || !j["problem"].is_string() || j["problem"].get<std::string>().empty())
      throw bad("has a \"problem\" that is not a lone, non-empty string");
    s.problem = j["problem"].get<std::string>();
    return s;
  }
  const auto number = [&](const char* key, bool mfu) {
    if (!j.contains(key) || !j[key].is_number()) throw bad(fmt::format("has no number \"{}\"", key));
    const double v = j[key].get<double>();
    if (!std::isfinite(v) || v <= 0 || (mfu && v > 1))
      throw bad(fmt::format("has \"{}\": {}, outside {}", key, v, mfu ? "(0, 1]" : "(0, ∞)"));
    return v;
  };
  const auto integer = [&](const char* key, int64_t lo) {
    if (!j.contains(key) || !j[key].is_number_integer()) throw bad(fmt::format("has no integer \"{}\"", key));
    const int64_t v = j[key].get<int64_t>();
    if (v < lo) throw bad(fmt::format("has \"{}\": {}, below {}", key, v, lo));
    return v;
  };
  s.iteration_s = number("iteration_s", false);
  s.tokens_per_s = number("tokens_per_s", false);
  s.mfu = number("mfu", true);
  s.gpus = integer("gpus", 1);
  s.peak_memory_bytes = integer("peak_memory_bytes", 0);
  if (j.contains("layout")) {
    if (!j["layout"].is_string()) throw bad("has a \"layout\" that is not a string");
    s.layout = j["layout"].get<std::string>();
  }
  return s;
}

void check_record(const std::string& record, const SourceLocation& where) { (void)parse_record(record, where); }

std::map<size_t, std::string> read_journal(const std::string& path, uint64_t search_hash, size_t candidates) {
  return lacuna::read_journal(kSearchJournal, path, search_hash, candidates, check_record);
}

std::map<size_t, std::string> parse_journal(std::string_view text, const std::string& path, uint64_t search_hash,
                                            size_t candidates) {
  return lacuna::parse_journal(kSearchJournal, text, path, search_hash, candidates, check_record);
}

}  // namespace lacuna::search
