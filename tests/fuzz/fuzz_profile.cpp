// libFuzzer target: the calibration profile reader with its validation.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sim/calibration/profile_io.h"
#include "sim/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    (void)lacuna::calibration::parse_profile(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
  } catch (const lacuna::Error&) {
  }
  return 0;
}
