// libFuzzer target: `lacuna diff`'s readers of the timeline JSON
// (`simulate --json`, `execute --json`) and of the span trace (`--spans`),
// chosen by the first byte as `diff` chooses.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sim/core/error.h"
#include "sim/report/analyses/diff.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    (void)lacuna::report::parse_diff_file(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz-input");
  } catch (const lacuna::Error&) {
  }
  return 0;
}
