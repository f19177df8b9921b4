#include "sim/search/search_journal.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/core/error.h"

namespace lacuna::search {
namespace {

constexpr std::string_view kMagic = "lacuna-search-journal";
constexpr std::string_view kVersion = "v2";

uint64_t fnv1a(std::string_view text, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

uint64_t checksum(uint64_t search_hash, size_t id, std::string_view record) {
  return fnv1a(record, fnv1a(fmt::format("{:016x}\t{}\t", search_hash, id)));
}

[[noreturn]] void refuse(const std::string& path, int line, const std::string& what) {
  throw Error(SourceLocation{path, line, 0, {}}, what, std::string(kJournalInput.fix));
}

// A run of 16 lowercase hex digits, as journal_line writes them.
bool parse_hex16(std::string_view text, uint64_t& out) {
  if (text.size() != 16) return false;
  out = 0;
  for (char c : text) {
    int v;
    if (c >= '0' && c <= '9') v = c - '0';
    else if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
    else return false;
    out = out << 4 | static_cast<uint64_t>(v);
  }
  return true;
}

// A candidate id: decimal digits only, no sign, no leading zeros but "0".
bool parse_id(std::string_view text, size_t& out) {
  if (text.empty() || text.size() > 19 || (text.size() > 1 && text[0] == '0')) return false;
  out = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    out = out * 10 + static_cast<size_t>(c - '0');
  }
  return true;
}

}  // namespace

std::string journal_header(uint64_t search_hash) {
  return fmt::format("{} {} {:016x}", kMagic, kVersion, search_hash);
}

std::string journal_line(uint64_t search_hash, size_t id, const std::string& record) {
  return fmt::format("{}\t{}\t{:016x}", id, record, checksum(search_hash, id, record));
}

void check_journal_path(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return;
    refuse(path, 0, fmt::format("cannot inspect the search journal: {}", std::strerror(errno)));
  }
  if (S_ISREG(st.st_mode)) return;
  const char* what = S_ISLNK(st.st_mode)    ? "a symbolic link"
                     : S_ISFIFO(st.st_mode) ? "a FIFO"
                     : S_ISCHR(st.st_mode)  ? "a character device"
                     : S_ISBLK(st.st_mode)  ? "a block device"
                     : S_ISDIR(st.st_mode)  ? "a directory"
                     : S_ISSOCK(st.st_mode) ? "a socket"
                                            : "not a regular file";
  const char* why = S_ISLNK(st.st_mode) ? "the search rewrites it, and would write through the link to whatever it "
                                          "points at"
                    : S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode) || S_ISSOCK(st.st_mode)
                        ? "reading it could block forever or never end"
                        : "the search rewrites it";
  throw Error(SourceLocation{path, 0, 0, {}},
              fmt::format("the search journal is {}; it must be a regular file ({})", what, why),
              "remove it, or give ‹csv› another path (the journal is the CSV's path + \".journal\")");
}

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

std::map<size_t, std::string> read_journal(const std::string& path, uint64_t search_hash, size_t candidates) {
  check_journal_path(path);
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return {};  // none yet
  return parse_journal(read_input_file(path, kJournalInput), path, search_hash, candidates);
}

std::map<size_t, std::string> parse_journal(std::string_view text, const std::string& path, uint64_t search_hash,
                                            size_t candidates) {
  std::map<size_t, std::string> out;
  size_t begin = 0;
  int line_no = 0;
  while (begin < text.size()) {
    const size_t nl = text.find('\n', begin);
    const bool complete = nl != std::string::npos;
    const std::string_view line(text.data() + begin, (complete ? nl : text.size()) - begin);
    begin = complete ? nl + 1 : text.size();
    ++line_no;
    if (line_no == 1) {
      if (!complete || line.substr(0, kMagic.size()) != kMagic)
        refuse(path, 1, "not a search journal (its first line is not \"lacuna-search-journal …\")");
      if (line != journal_header(search_hash)) {
        // "lacuna-search-journal vN …": the word after the magic (none: cut short).
        const std::string_view rest = line.substr(kMagic.size());
        const bool other_version = rest.size() < kVersion.size() + 1 || rest.substr(1, kVersion.size()) != kVersion;
        refuse(path, 1,
               other_version ? "a search journal of another format (written by another lacuna version)"
                             : "this journal belongs to another search (scenario or constraints differ)");
      }
      continue;
    }
    if (!complete) break;   // the interrupted last record: dropped
    if (line.empty()) continue;  // the separator a resumed run writes
    const size_t tab1 = line.find('\t');
    const size_t tab2 = line.rfind('\t');
    if (tab1 == std::string_view::npos || tab2 == tab1)
      refuse(path, line_no, "not \"id TAB record TAB checksum\"");
    size_t id = 0;
    uint64_t sum = 0;
    const std::string_view id_text = line.substr(0, tab1);
    const std::string record(line.substr(tab1 + 1, tab2 - tab1 - 1));
    if (!parse_id(id_text, id)) refuse(path, line_no, fmt::format("the candidate id \"{}\" is not a number", id_text));
    if (!parse_hex16(line.substr(tab2 + 1), sum) || sum != checksum(search_hash, id, record))
      refuse(path, line_no, "the record fails its checksum: the journal was edited or damaged");
    if (id >= candidates)
      refuse(path, line_no, fmt::format("candidate {} does not exist (this search has {})", id, candidates));
    (void)parse_record(record, SourceLocation{path, line_no, 0, {}});
    const auto [it, inserted] = out.emplace(id, record);
    if (!inserted && it->second != record)
      refuse(path, line_no, fmt::format("a second, different record for candidate {}", id));
  }
  return out;
}

}  // namespace lacuna::search
