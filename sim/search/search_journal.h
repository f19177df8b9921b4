// The journal of a search's finished simulations, which `--resume` reuses
// (docs/search.md#interrupted-searches). It is read back as an input, so it
// is held to what every input is (docs/reliability.md#inputs): a regular file
// (never a symlink, FIFO or device), under a size cap, and nothing in it is
// used unchecked.
//
// Format (v2): the first line names the search,
//   lacuna-search-journal v2 <search hash, 16 hex digits>
// then one line per finished simulation,
//   <candidate id> TAB <record: JSON> TAB <checksum, 16 hex digits>
// where the checksum is FNV-1a 64 over "<search hash>\t<id>\t<record>": a
// record edited, damaged or copied from another search fails it. Only the
// last line may be cut short (no newline at its end: the interrupted write),
// and it is dropped; any other bad line is refused by its line number.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "sim/core/input_file.h"
#include "sim/search/search_run.h"

namespace lacuna::search {

inline constexpr InputKind kJournalInput{"search journal", 64 * kMiB,
                                         "remove it, or rerun without ‹resume› (the search starts afresh)"};

// The first line of the journal of the search whose identity hashes to
// `search_hash` (the scenario and constraints, search_run.cpp).
std::string journal_header(uint64_t search_hash);

// One finished simulation's line, without its newline.
std::string journal_line(uint64_t search_hash, size_t id, const std::string& record);

// Refuses a journal path that exists and is not a regular file (lstat: a
// symlink, FIFO, device, socket or directory), naming it: the journal is
// truncated and appended to, so a link would write through to whatever it
// points at, and a FIFO would block.
void check_journal_path(const std::string& path);

// One record (simulate_plan's JSON) as a Simulated: either {"problem": text}
// or every figure, each of its type and in its range (iteration_s,
// tokens_per_s > 0 and finite, mfu in (0, 1], gpus ≥ 1, peak_memory_bytes
// ≥ 0; layout optional). Throws lacuna::Error saying what is wrong, located
// at `where`.
Simulated parse_record(const std::string& record, const SourceLocation& where);

// The records of the journal at `path` by candidate id ({} when it does not
// exist). Refuses (lacuna::Error naming the file and line): a path
// check_journal_path refuses, a file over kJournalInput's cap, a header of
// another search or format, and any complete line that is not
// "id TAB record TAB checksum" with a valid checksum, an id below
// `candidates`, a record that parse_record accepts, and no other record for
// the same id. A cut-short last line is dropped.
std::map<size_t, std::string> read_journal(const std::string& path, uint64_t search_hash, size_t candidates);
// The same rules over a journal's text (`path` names it in errors): what
// read_journal applies once the file is read, and what the fuzz target runs.
std::map<size_t, std::string> parse_journal(std::string_view text, const std::string& path, uint64_t search_hash,
                                            size_t candidates);

}  // namespace lacuna::search
