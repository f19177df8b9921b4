// The journal of a search's finished simulations, which `--resume` reuses
// (docs/search.md#interrupted-searches): a work journal (sim/core/work_journal.h)
// whose records are simulate_plan's JSON, each checked by parse_record.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "sim/core/work_journal.h"
#include "sim/search/search_run.h"

namespace lacuna::search {

inline constexpr JournalKind kSearchJournal{
    "lacuna-search-journal",
    "v2",
    "search journal",
    "candidate",
    "search",
    InputKind{"search journal", 64 * kMiB, "remove it, or rerun without ‹resume› (the search starts afresh)"},
    "give ‹csv› another path (the journal is the CSV's path + \".journal\")"};
inline constexpr const InputKind& kJournalInput = kSearchJournal.input;

// The first line of the journal of the search whose identity hashes to
// `search_hash` (the scenario and constraints, search_run.cpp).
inline std::string journal_header(uint64_t search_hash) { return lacuna::journal_header(kSearchJournal, search_hash); }
using lacuna::journal_line;
inline void check_journal_path(const std::string& path) { lacuna::check_journal_path(kSearchJournal, path); }

// One record (simulate_plan's JSON) as a Simulated: either {"problem": text}
// or every figure, each of its type and in its range (iteration_s,
// tokens_per_s > 0 and finite, mfu in (0, 1], gpus ≥ 1, peak_memory_bytes
// ≥ 0; layout optional). Throws lacuna::Error saying what is wrong, located
// at `where`.
Simulated parse_record(const std::string& record, const SourceLocation& where);

// parse_record as a lacuna::RecordCheck.
void check_record(const std::string& record, const SourceLocation& where);

// The search's journal read as lacuna::read_journal reads one, its records
// checked by parse_record; candidates are the search's plans.
std::map<size_t, std::string> read_journal(const std::string& path, uint64_t search_hash, size_t candidates);
// The same over a journal's text: what the fuzz target runs.
std::map<size_t, std::string> parse_journal(std::string_view text, const std::string& path, uint64_t search_hash,
                                            size_t candidates);

}  // namespace lacuna::search
