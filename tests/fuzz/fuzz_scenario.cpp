// libFuzzer target: the scenario reader, text format and JSON, with every
// validation rule. Any input may be refused with lacuna::Error; anything
// else (a crash, a sanitizer report, another exception) is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sim/core/error.h"
#include "sim/scenario/scenario.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const auto format : {lacuna::scenario::Format::kText, lacuna::scenario::Format::kJson}) {
    try {
      (void)lacuna::scenario::parse_scenario(text, format, "fuzz");
    } catch (const lacuna::Error&) {
      // refused by name: the expected outcome for most inputs
    }
  }
  return 0;
}
