// libFuzzer target: a compiled program (.pb) as `simulate FILE.pb` reads it:
// protobuf parsing, the content digest, then validate_program. Validation is
// run whatever the digest says, so that the fuzzer reaches it.
#include <cstddef>
#include <cstdint>

#include "sim/core/error.h"
#include "sim/ir/digest.h"
#include "sim/ir/validate.h"
#include "sim/proto/program.pb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lacuna::ir::Program program;
  if (!program.ParseFromArray(data, static_cast<int>(size))) return 0;
  try {
    (void)lacuna::ir::check_content_digest(program, "fuzz.pb");
  } catch (const lacuna::Error&) {
  }
  try {
    lacuna::ir::validate_program(program, "fuzz.pb");
  } catch (const lacuna::Error&) {
  }
  return 0;
}
