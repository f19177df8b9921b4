#include "sim/core/work_journal.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "sim/core/atomic_file.h"

namespace lacuna {
namespace {

uint64_t checksum(uint64_t run_hash, size_t id, std::string_view record) {
  return fnv1a64(record, fnv1a64(fmt::format("{:016x}\t{}\t", run_hash, id)));
}

[[noreturn]] void refuse(const JournalKind& kind, const std::string& path, int line, const std::string& what) {
  throw Error(SourceLocation{path, line, 0, {}}, what, std::string(kind.input.fix));
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

// An item id: decimal digits only, no sign, no leading zeros but "0".
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

uint64_t fnv1a64(std::string_view text, uint64_t h) {
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string journal_header(const JournalKind& kind, uint64_t run_hash) {
  return fmt::format("{} {} {:016x}", kind.magic, kind.version, run_hash);
}

std::string journal_line(uint64_t run_hash, size_t id, const std::string& record) {
  return fmt::format("{}\t{}\t{:016x}", id, record, checksum(run_hash, id, record));
}

void check_journal_path(const JournalKind& kind, const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return;
    refuse(kind, path, 0, fmt::format("cannot inspect the {}: {}", kind.what, std::strerror(errno)));
  }
  if (S_ISREG(st.st_mode)) return;
  const char* what = S_ISLNK(st.st_mode)    ? "a symbolic link"
                     : S_ISFIFO(st.st_mode) ? "a FIFO"
                     : S_ISCHR(st.st_mode)  ? "a character device"
                     : S_ISBLK(st.st_mode)  ? "a block device"
                     : S_ISDIR(st.st_mode)  ? "a directory"
                     : S_ISSOCK(st.st_mode) ? "a socket"
                                            : "not a regular file";
  const char* why = S_ISLNK(st.st_mode) ? "the run rewrites it, and would write through the link to whatever it points at"
                    : S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode) || S_ISSOCK(st.st_mode)
                        ? "reading it could block forever or never end"
                        : "the run rewrites it";
  throw Error(SourceLocation{path, 0, 0, {}},
              fmt::format("the {} is {}; it must be a regular file ({})", kind.what, what, why),
              "remove it, or " + std::string(kind.path_fix));
}

std::map<size_t, std::string> read_journal(const JournalKind& kind, const std::string& path, uint64_t run_hash,
                                           size_t items, const RecordCheck& check) {
  check_journal_path(kind, path);
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return {};  // none yet
  return parse_journal(kind, read_input_file(path, kind.input), path, run_hash, items, check);
}

std::vector<std::string> journal_paths(const std::string& path, int processes) {
  std::vector<std::string> out;
  if (path.empty()) return out;
  for (int r = 0; r < processes; ++r) out.push_back(r == 0 ? path : fmt::format("{}.{}", path, r));
  return out;
}

std::map<size_t, std::string> read_journals(const JournalKind& kind, const std::vector<std::string>& paths,
                                            uint64_t run_hash, size_t items, const RecordCheck& check, int rank,
                                            std::map<size_t, std::string>* own) {
  std::map<size_t, std::string> all;
  for (size_t r = 0; r < paths.size(); ++r) {
    std::map<size_t, std::string> records = read_journal(kind, paths[r], run_hash, items, check);
    if (own != nullptr && static_cast<int>(r) == rank) *own = records;
    all.merge(records);
  }
  return all;
}

JournalLog::JournalLog(const JournalKind& kind, const std::string& path, uint64_t run_hash,
                       const std::map<size_t, std::string>& kept)
    : hash_(run_hash) {
  check_journal_path(kind, path);
  std::string start = journal_header(kind, run_hash) + "\n";
  for (const auto& [id, record] : kept) start += journal_line(run_hash, id, record) + "\n";
  write_file_atomically(path, start);
  out_.open(path, std::ios::app);
  if (!out_) throw Error(SourceLocation{path, 0, 0, {}}, fmt::format("cannot write the {}", kind.what));
}

void JournalLog::append(size_t id, const std::string& record) {
  std::lock_guard<std::mutex> hold(lock_);
  out_ << journal_line(hash_, id, record) << "\n" << std::flush;
}

std::map<size_t, std::string> parse_journal(const JournalKind& kind, std::string_view text, const std::string& path,
                                            uint64_t run_hash, size_t items, const RecordCheck& check) {
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
      if (!complete || line.substr(0, kind.magic.size()) != kind.magic)
        refuse(kind, path, 1, fmt::format("not a {} (its first line is not \"{} …\")", kind.what, kind.magic));
      if (line != journal_header(kind, run_hash)) {
        // "<magic> vN …": the word after the magic (none: cut short).
        const std::string_view rest = line.substr(kind.magic.size());
        const bool other_version = rest.size() < kind.version.size() + 1 || rest.substr(1, kind.version.size()) != kind.version;
        refuse(kind, path, 1,
               other_version ? fmt::format("a {} of another format (written by another lacuna version)", kind.what)
                             : fmt::format("this journal belongs to another {} (its scenario or options differ)", kind.run));
      }
      continue;
    }
    if (!complete) break;   // the interrupted last record: dropped
    if (line.empty()) continue;  // the separator a resumed run writes
    const size_t tab1 = line.find('\t');
    const size_t tab2 = line.rfind('\t');
    if (tab1 == std::string_view::npos || tab2 == tab1)
      refuse(kind, path, line_no, "not \"id TAB record TAB checksum\"");
    size_t id = 0;
    uint64_t sum = 0;
    const std::string_view id_text = line.substr(0, tab1);
    const std::string record(line.substr(tab1 + 1, tab2 - tab1 - 1));
    if (!parse_id(id_text, id)) refuse(kind, path, line_no, fmt::format("the {} id \"{}\" is not a number", kind.item, id_text));
    if (!parse_hex16(line.substr(tab2 + 1), sum) || sum != checksum(run_hash, id, record))
      refuse(kind, path, line_no, "the record fails its checksum: the journal was edited or damaged");
    if (id >= items)
      refuse(kind, path, line_no, fmt::format("{} {} does not exist (this run has {})", kind.item, id, items));
    check(record, SourceLocation{path, line_no, 0, {}});
    const auto [it, inserted] = out.emplace(id, record);
    if (!inserted && it->second != record)
      refuse(kind, path, line_no, fmt::format("a second, different record for {} {}", kind.item, id));
  }
  return out;
}

}  // namespace lacuna
