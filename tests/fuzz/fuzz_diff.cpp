// libFuzzer target: `lacuna diff`'s reader of the timeline JSON that
// `simulate --json` and `execute --json` write.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sim/core/error.h"
#include "sim/report/diff.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    (void)lacuna::report::parse_diff_input(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.json");
  } catch (const lacuna::Error&) {
  }
  return 0;
}
