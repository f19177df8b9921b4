// A journal of finished work items (a search's simulated plans, a sweep's
// points), which a resumed run reuses. It is read back as an input, so it is
// held to what every input is (docs/reliability.md#inputs): a regular file
// (never a symlink, FIFO or device), under a size cap, and nothing in it is
// used unchecked.
//
// Format: the first line names the kind, its format version and the run,
//   <magic> <version> <run hash, 16 hex digits>
// then one line per finished item,
//   <item id> TAB <record> TAB <checksum, 16 hex digits>
// where the checksum is FNV-1a 64 over "<run hash>\t<id>\t<record>": a record
// edited, damaged or copied from another run fails it. Only the last line may
// be cut short (no newline at its end: the interrupted write), and it is
// dropped; any other bad line is refused by its line number.
#pragma once

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/error.h"
#include "sim/core/input_file.h"

namespace lacuna {

struct JournalKind {
  std::string_view magic;    // "lacuna-search-journal"
  std::string_view version;  // "v2"
  std::string_view what;     // "search journal", in messages
  std::string_view item;     // "candidate", in messages
  std::string_view run;      // "search": a journal of another one "belongs to another search"
  InputKind input;           // its cap and the fix for a refused journal
  std::string_view path_fix; // how to name another journal ("give ‹csv› another path …")
};

// Throws lacuna::Error (located at the record's line) for a record the run
// does not write.
using RecordCheck = std::function<void(const std::string& record, const SourceLocation& where)>;

std::string journal_header(const JournalKind& kind, uint64_t run_hash);
// One finished item's line, without its newline.
std::string journal_line(uint64_t run_hash, size_t id, const std::string& record);

// Refuses a journal path that exists and is not a regular file (lstat: a
// symlink, FIFO, device, socket or directory), naming it: the run rewrites
// and appends to the journal, so a link would write through to whatever it
// points at, and a FIFO would block.
void check_journal_path(const JournalKind& kind, const std::string& path);

// The records of the journal text by item id (`path` names it in errors).
// Refuses a header of another kind, version or run, and any complete line that
// is not "id TAB record TAB checksum" with a valid checksum, an id below
// `items`, a record `check` accepts, and no other record for the same id.
std::map<size_t, std::string> parse_journal(const JournalKind& kind, std::string_view text, const std::string& path,
                                            uint64_t run_hash, size_t items, const RecordCheck& check);

// The same over the file at `path` ({} when it does not exist), refused first
// by check_journal_path and by size (kind.input's cap) before it is read.
std::map<size_t, std::string> read_journal(const JournalKind& kind, const std::string& path, uint64_t run_hash,
                                           size_t items, const RecordCheck& check);

// The journals of a run over `processes` MPI processes: `path` for the root,
// "path.RANK" for the others; none for an empty path.
std::vector<std::string> journal_paths(const std::string& path, int processes);

// Every process's journal (read_journal each), merged by item id; `own`
// (when given) gets the records of `paths[rank]`.
std::map<size_t, std::string> read_journals(const JournalKind& kind, const std::vector<std::string>& paths,
                                            uint64_t run_hash, size_t items, const RecordCheck& check, int rank,
                                            std::map<size_t, std::string>* own);

// One process's journal while its run goes: started by rewriting the file
// with the header and `kept` (what this process logged before an
// interruption, so that a record the interruption cut short is gone), then
// appended to, one flushed line per finished item, from any thread.
class JournalLog {
 public:
  JournalLog(const JournalKind& kind, const std::string& path, uint64_t run_hash,
             const std::map<size_t, std::string>& kept);
  void append(size_t id, const std::string& record);

 private:
  uint64_t hash_;
  std::ofstream out_;
  std::mutex lock_;
};

// FNV-1a 64 of `text`, continuing from `h` (a run's identity hashes its inputs).
uint64_t fnv1a64(std::string_view text, uint64_t h = 1469598103934665603ull);

}  // namespace lacuna
