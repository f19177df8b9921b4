// libFuzzer target: a search journal's text read back as `--resume` reads it
// (sim/search/search_journal.h), and every record it accepts parsed as the
// search uses it. The seeds are journals of the search whose hash is kHash.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sim/core/error.h"
#include "sim/search/search_journal.h"

namespace {
constexpr uint64_t kHash = 0x5eed5eed5eed5eedull;  // the seeds' search
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto records = lacuna::search::parse_journal(std::string_view(reinterpret_cast<const char*>(data), size),
                                                       "journal", kHash, 1000);
    for (const auto& [id, record] : records) (void)lacuna::search::parse_record(record, lacuna::SourceLocation{});
  } catch (const lacuna::Error&) {
  }
  return 0;
}
